#pragma once
// The device a backend runs on, as tuning database metadata (GPU name, compute capability,
// SM count, L2 size, driver/NVRTC/ropejit versions).
#include <memory>
#include <string>

#include "backend.h"
#include "ropejit/tuning_db.h"

namespace ropejit {

/// The metadata a tuning database section is keyed by, for the device `backend` runs on.
/// cuda: `ordinal` names the device; -1 = the first device whose compute capability and SM
/// count match the backend (identical GPUs have identical metadata). host: gpu_name "host",
/// compute_capability = backend.arch(), so a GPU's section never applies to it.
DeviceMetadata device_metadata(const Backend& backend, int ordinal = -1);

/// The CUDA device ordinal `device_metadata` resolved for `backend` (0 on host).
int resolve_device_ordinal(const Backend& backend, int ordinal);

}  // namespace ropejit
