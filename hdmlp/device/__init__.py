"""The device stage: batches on a device, and JPEGs decoded there.

``hdmlp.Job(..., device="cuda:0")``, ``HDMLPDataLoader(dataset, device=...)`` and
``job.batches(device=...)`` deliver device tensors; ``ImgDecode(device=...)`` decodes on the
device. The stage sits between the job, whose public pass API it uses, and the front ends; it
imports neither. One concept per module:

* :mod:`~hdmlp.device.hand_off`: which device, and what the workers write for it (the 8-bit
  hand-off, whose float end :class:`FloatTail` computes on the device);
* :mod:`~hdmlp.device.feeder`: :class:`DeviceFeeder`, the copy ahead of the training loop;
* :mod:`~hdmlp.device.streams`, :mod:`~hdmlp.device.cuda`: where a device's work runs
  (:class:`Streams`); a new device is its ``Streams`` in one module plus one line in
  :data:`hdmlp.device.feeder.STREAMS_BY_TYPE`;
* :mod:`~hdmlp.device.host_tensors`: a delivered batch as host tensors (the front end's too);
* :mod:`~hdmlp.device.decode`, :mod:`~hdmlp.device.resize`, :mod:`~hdmlp.device.nvjpeg`: decoding
  on the device, its batched crop and resize, and hdmlp's own nvJPEG decoder (loaded when used).
"""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("batches on a device (device=...) need PyTorch, which is not installed: pip install "
                      "'hdmlp[torch]' (or leave device unset)") from e

from hdmlp.device.cuda import CudaStreams
from hdmlp.device.feeder import (MAX_AHEAD, DeviceFeeder, InFlight, check_ahead, feed_job_pass, feed_pass,
                                 streams_for)
from hdmlp.device.hand_off import FloatTail, HandOff, check_channels_last, plan_hand_off, resolve_device
from hdmlp.device.streams import Streams

__all__ = ["CudaStreams", "DeviceFeeder", "FloatTail", "Streams", "plan_hand_off", "resolve_device"]
