#pragma once
// The device a backend runs on, as tuning database metadata (GPU name, compute capability,
// SM count, L2 size, driver/NVRTC/ropejit versions).
#include "ropejit/internal/backend.h"
#include "ropejit/tuning_db.h"

namespace ropejit {

/// The metadata a tuning database section is keyed by, for the device `backend` runs on
/// (backend.properties() plus versions). host: gpu_name "host", compute_capability =
/// backend.arch(), so a GPU's section never applies to it.
DeviceMetadata device_metadata(const Backend& backend);

}  // namespace ropejit
