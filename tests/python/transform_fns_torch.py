"""A picklable transform whose module imports torch, so that hdmlp's workers seed torch before each call."""
import torch  # noqa: F401

import transform_fns


def draws(data):
    return transform_fns.draws(data)
