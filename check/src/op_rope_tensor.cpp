// Op rope_tensor's check row: inverse_rope's float64 reference turned forward (each head's rope
// pairs by their angle, HF's apply_rotary_pos_emb on the one tensor; the rest as it was).
#include "reference_detail.h"

namespace ropejit::ref::detail {

extern const CheckOp kCheckOp_rope_tensor{OpKind::rope_tensor, reference_one_tensor_rotation, problem_inputs_q};

}  // namespace ropejit::ref::detail
