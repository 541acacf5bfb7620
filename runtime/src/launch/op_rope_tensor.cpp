// Op rope_tensor's row of the launch op table: inverse_rope's binding (one tensor [T, Hq, D] in
// q's fields, its rope slices rotated in place at the spec's positions), the rotation forward.
#include "launch/tensor_rows.h"

namespace ropejit::launch_detail {

extern const LaunchOp kLaunchOp_rope_tensor = {OpKind::rope_tensor, bind_one_tensor_rotation,
                                               check_positions_form_host, buffers_one_tensor_rotation};

}  // namespace ropejit::launch_detail
