#pragma once
/// Tuning files shipped with ropejit (docs/tuning.md, "Shipped tuning files"): one database
/// file per GPU name, measured by the developers on that GPU and installed with the library.
/// The runtime reads the running device's file when the user's database has no section for the
/// device. Its section applies when the hardware, the ropejit version and the CUDA (NVRTC)
/// major.minor match; the driver version may differ.
#include <optional>
#include <string>
#include <vector>

#include "ropejit/tuning_db.h"
#include "ropejit/warnings.h"

namespace ropejit {

/// The environment variable naming the folder of shipped tuning files; "none" or an empty
/// value: no shipped file is read.
inline constexpr const char kShippedTuningDirEnv[] = "ROPEJIT_SHIPPED_TUNING_DIR";

/// The file name of a GPU's shipped tuning file: its name in lowercase, each run of characters
/// other than a-z and 0-9 one '-', none at either end, then ".json"
/// ("NVIDIA H100 80GB HBM3" → "nvidia-h100-80gb-hbm3.json"). A name with no letter or digit
/// gives "unnamed.json".
std::string shipped_tuning_file_name(const std::string& gpu_name);

/// Where shipped tuning files are looked up and which folder is read.
struct ShippedTuningDir {
  std::string dir;                    ///< the folder read; empty: no shipped file is read
  std::string origin;                 ///< why this folder, or why none ("$ROPEJIT_SHIPPED_TUNING_DIR is none")
  std::vector<std::string> searched;  ///< the library-relative folders tried, in order
};

/// The folder of shipped tuning files. `given` (RuntimeOptions::shipped_tuning_dir) when not
/// empty, else $ROPEJIT_SHIPPED_TUNING_DIR when set; either "none" (or an empty variable) turns
/// shipped files off. Else the first existing folder of: the source tree's tunedb/shipped when
/// the library runs from its build folder; `<library folder>/tuning` (the Python package);
/// `<library folder>/<relative path to DATADIR>/ropejit/tuning` (an install prefix). The library
/// folder is where dladdr finds libropejit.
ShippedTuningDir shipped_tuning_dir(const std::string& given = "");

/// Whether a shipped section applies to the running device: GPU name, compute capability, SM
/// count, L2 size and ropejit version equal, NVRTC equal in major.minor. The driver version
/// may differ: a shipped file is measured under one driver and read under many.
bool shipped_section_applies(const DeviceMetadata& section, const DeviceMetadata& device);

/// The section of the shipped tuning file at `path` that applies to `device`, or nullopt. An
/// absent file: nullopt, silently. A damaged file, or one with no section that applies: nullopt
/// with one one-line warning naming the file, what it was made for and what is running.
std::optional<DeviceSection> read_shipped_tuning(const std::string& path, const DeviceMetadata& device,
                                                 const WarningSink& warn = {});

}  // namespace ropejit
