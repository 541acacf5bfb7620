// Device metadata for the tuning database, from what the backend reports about its device.
#include "ropejit/internal/device_info.h"

#include <fmt/format.h>

#include "ropejit/compile.h"
#include "ropejit/source.h"

namespace ropejit {

DeviceMetadata device_metadata(const Backend& backend) {
  const DeviceProperties device = backend.properties();
  DeviceMetadata m;
  m.ropejit_version = version();
  m.nvrtc_version = nvrtc_version();
  m.gpu_name = device.name;
  m.sm_count = device.sm_count;
  m.l2_bytes = device.l2_bytes;
  m.driver_version = device.driver_version;
  // The host has no compute capability; its arch keeps its sections apart from any GPU's.
  m.compute_capability = backend.name() == "cuda"
                             ? fmt::format("{}.{}", device.compute_capability_major, device.compute_capability_minor)
                             : backend.arch();
  return m;
}

}  // namespace ropejit
