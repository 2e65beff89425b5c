#include "hdmlp/transforms/libm.h"

namespace hdmlp {
namespace libm {

std::atomic<int> g_result_shift{0};

void ShiftResultsForTesting(int ulps) { g_result_shift.store(ulps, std::memory_order_relaxed); }

}  // namespace libm
}  // namespace hdmlp
