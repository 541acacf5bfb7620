// Op attn_temperature's row of the launch op table: q [T, Hq, D] scaled in place at the
// positions of the spec's positions form; no other tensor.
#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

namespace {

// q [T, Hq, D], read and written in place: every element moves.
constexpr TensorRow kRows[] = {
    {"q", "q_stride", nullptr, {"T", "Hq", "D"}, BufferKind::inout, nullptr,
     "when the spec's op is attn_temperature (q is scaled in place)", {ParamSlot::in_q, ParamSlot::out_q}},
};

int64_t bind_op(const FormContext& c, const Args& a, KernelParams& p) {
  bind_tensor_rows(c, a, p, kRows);
  bind_positions(c, a, p);
  return a.num_tokens;
}

void buffers_op(const Spec& s, const LaunchShape& shape, std::vector<BufferDesc>& out) {
  buffers_tensor_rows(s, shape, kRows, out);
  buffers_positions(s, shape, out);
}

}  // namespace

extern const LaunchOp kLaunchOp_attn_temperature = {OpKind::attn_temperature, bind_op, check_positions_form_host,
                                                    buffers_op};

}  // namespace ropejit::launch_detail
