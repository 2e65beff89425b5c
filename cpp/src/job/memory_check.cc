#include "hdmlp/job/memory_check.h"

#include <algorithm>

namespace hdmlp {

int64_t BatchMemoryBytes(const BatchMemoryNeed& m) {
  const double bytes = static_cast<double>(m.batches) * static_cast<double>(m.batch) * static_cast<double>(m.row_bytes) +
                       static_cast<double>(m.read_bytes);
  return bytes >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(bytes);
}

std::string BatchMemoryError(const BatchMemoryNeed& m, const MemoryLimit& limit) {
  if (limit.available < 0) return "";
  const int64_t need = BatchMemoryBytes(m);
  if (need <= limit.available) return "";
  std::string message = "cannot hold this job's batches in memory: each sample ('" + m.sample + "', " + m.row_kind +
                        ") takes " + FormatBytes(m.row_bytes) + " in its batch, so a batch of " +
                        std::to_string(m.batch) + " takes " + FormatBytes(m.batch * m.row_bytes) + ", " +
                        std::to_string(m.batches) + " of them at once (the training loop holds one while the next "
                        "is filled)";
  if (m.read_bytes > 0) message += ", and reading a sample into its row " + FormatBytes(m.read_bytes) + " more";
  message += ": " + FormatBytes(need) + ", more than this process may still take: " + limit.Describe() + ". ";
  const int64_t per_sample = m.batches * m.row_bytes;
  const int64_t fits = per_sample > 0 ? (limit.available - m.read_bytes) / per_sample : 0;
  if (fits >= 1) {
    const int64_t k = std::min(fits, m.batch - 1);
    message += m.per_rank ? "Use batch_size_per_rank=" + std::to_string(k) + " or less"
                          : "Use batch_size=" + std::to_string(k * m.world_size) + " or less" +
                                (m.world_size > 1 ? " (" + std::to_string(k) + " per rank on " +
                                                        std::to_string(m.world_size) + " ranks)"
                                                  : std::string());
    message += " (" + FormatBytes(k * per_sample + m.read_bytes) + "), or " + limit.raise;
  } else {
    message += "No batch size fits: a batch of one needs " + FormatBytes(per_sample + m.read_bytes) + "; " +
               limit.raise + " by at least " + FormatBytes(per_sample + m.read_bytes - limit.available) +
               ", or " + m.smaller;
  }
  return message;
}

std::string SampleMemoryError(const std::string& sample, int64_t bytes, const MemoryLimit& limit) {
  return "cannot hold sample " + sample + " (" + FormatBytes(bytes) + ", " + std::to_string(bytes) +
         " bytes) in memory: it is more than this process could still take when the job started, " + limit.Describe() +
         "; on_error=\"skip\" leaves such samples out, or " + limit.raise;
}

}  // namespace hdmlp
