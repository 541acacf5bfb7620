// `ropejit spec`: validate specs, import HF configs, print the schema, hash and canonical form.
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "command_registry.h"
#include "ropejit/hf_import.h"
#include "ropejit/spec.h"
#include "ropejit/spec_schema.h"

namespace ropejit::cli {
namespace {

// Writes to `path`, or stdout when path is empty or "-".
void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    fmt::print("{}", text);
    return;
  }
  write_file(path, text);
}

// Prints OK or every issue of each file; fails when any file is invalid.
void validate_files(const std::vector<std::string>& files) {
  size_t invalid = 0;
  for (const auto& path : files) {
    try {
      Spec spec = load_spec_file(path);
      fmt::print("{}: OK ({} {})\n", path, spec.name, spec_hash(spec).hex());
    } catch (const SpecError& e) {
      ++invalid;
      for (const auto& issue : e.issues())
        fmt::print("{}: {}\n", path, issue.to_string());
    } catch (const Error& e) {
      ++invalid;
      fmt::print("{}: {}\n", path, e.what());
    }
  }
  if (invalid > 0)
    throw Error(Status::invalid_spec,
                fmt::format("{} of {} spec file(s) invalid", invalid, files.size()));
}

struct FromHfArgs {
  std::string config_path, dtype = "bf16", layout, name, output, layer_type, op;
  bool assume_llama = false, layers = false;
};

// --layers: every distinct spec of the model and the layer -> spec map, as one JSON document.
// A layer that runs another op than rope (Llama 4's NoPE layers) maps to that op's name.
std::string layers_document(const HfConfig& config, HfImportOptions options,
                            std::vector<std::string>& warnings) {
  const auto map = hf_layer_rope_map(config);
  const auto ops = hf_layer_ops(config);
  nlohmann::json specs = nlohmann::json::object(), layers = nlohmann::json::array();
  const std::string base = options.name;
  for (size_t i = 0; i < map.size(); ++i) {
    if (!ops[i]) {
      layers.push_back(nullptr);
      continue;
    }
    const bool rope = *ops[i] == OpKind{};
    const std::string type = rope ? *map[i] : std::string();
    const std::string key = !rope ? std::string(to_string(*ops[i])) : type.empty() ? "all" : type;
    layers.push_back(key);
    if (specs.contains(key)) continue;
    options.layer_type = type;
    options.op = *ops[i];
    options.name = base.empty() || (rope && type.empty()) ? base : base + "-" + key;
    specs[key] = nlohmann::json::parse(canonical_json(spec_from_hf(config, options, &warnings)));
  }
  return nlohmann::json({{"specs", specs}, {"layers", layers}}).dump(2) + "\n";
}

// Imports a config.json; warnings (where HF only warns) go to stderr, even when it fails.
void from_hf(const FromHfArgs& args) {
  HfImportOptions options;
  options.name = args.name;
  options.dtype = enum_option<DType>("--dtype", args.dtype);
  options.layout = enum_option<Layout>("--layout", args.layout);
  options.layer_type = args.layer_type;
  options.assume_generic = args.assume_llama;
  options.op = enum_option<OpKind>("--op", args.op).value_or(OpKind::rope);
  if (args.layers && !args.op.empty())
    throw Error(Status::invalid_argument, "--layers and --op are not allowed together: --layers picks each layer's op");
  if (args.layers && !args.layer_type.empty())
    throw Error(Status::invalid_argument, "--layers and --layer-type are not allowed together: --layers imports every layer type");
  const HfConfig config = [&] {
    try {
      return HfConfig::parse(read_file(args.config_path));
    } catch (const SpecError& e) {
      throw Error(Status::invalid_spec, fmt::format("{}: {}", args.config_path, e.what()), e.field());
    }
  }();
  std::vector<std::string> warnings;
  auto print_warnings = [&] {
    for (const auto& warning : warnings) fmt::print(stderr, "warning: {}\n", warning);
  };
  std::string text;
  try {
    text = args.layers ? layers_document(config, options, warnings)
                       : pretty_json(spec_from_hf(config, options, &warnings));
  } catch (...) {
    print_warnings();
    throw;
  }
  print_warnings();
  write_output(args.output, text);
}

void add_spec_command(CLI::App& app) {
  CLI::App* spec = app.add_subcommand("spec", "Validate specs, import HF configs, print schema/hash");
  spec->require_subcommand(1);

  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* validate = spec->add_subcommand("validate", "Check spec files; print OK or every issue");
  validate->add_option("files", *files, "spec JSON files")->required()->check(CLI::ExistingFile);
  validate->callback([files] { validate_files(*files); });

  auto hf = std::make_shared<FromHfArgs>();
  CLI::App* from = spec->add_subcommand("from-hf", "Make a spec from a Hugging Face config.json");
  from->add_option("config", hf->config_path, "HF config.json")->required()->check(CLI::ExistingFile);
  from->add_option("--dtype", hf->dtype, "storage type: " + allowed_names<DType>())->capture_default_str();
  from->add_option("--layout", hf->layout,
                   "override the layout inferred from model_type: " + allowed_names<Layout>());
  from->add_option("--name", hf->name, "spec name (default: model_type)");
  from->add_option("--op", hf->op,
                   "the op of the spec: " + allowed_names<OpKind>() +
                       " (mla_append: MLA's whole q heads, the latent cache row, a paged output)");
  from->add_option("--layer-type", hf->layer_type,
                   "the layer type whose rope block to import (configs with rope_parameters per layer type), or "
                   "indexer: a sparse-attention indexer's rotation (DeepSeek-V4's: indexer, indexer_keys, compressor; "
                   "docs/hf-import.md)");
  from->add_flag("--layers", hf->layers,
                 "every distinct spec of the model and the layer -> spec map (null: a layer without RoPE)");
  from->add_flag("--assume-llama", hf->assume_llama,
                 "import a model_type missing from the family table with Llama's conventions (else refused)");
  from->add_option("-o,--output", hf->output, "output file (default: stdout)");
  from->callback([hf] { from_hf(*hf); });

  auto schema_out = std::make_shared<std::string>();
  CLI::App* schema = spec->add_subcommand("schema", "Print the JSON Schema of the spec format");
  schema->add_option("-o,--output", *schema_out, "output file (default: stdout)");
  schema->callback([schema_out] { write_output(*schema_out, spec_schema_json()); });

  auto hash_file = std::make_shared<std::string>();
  CLI::App* hash = spec->add_subcommand("hash", "Print the spec's content hash (XXH3-128)");
  hash->add_option("file", *hash_file, "spec JSON file")->required()->check(CLI::ExistingFile);
  hash->callback([hash_file] { fmt::print("{}\n", spec_hash(load_spec_file(*hash_file)).hex()); });

  auto canonical_file = std::make_shared<std::string>();
  CLI::App* canonical = spec->add_subcommand("canonical", "Print the canonical (hashed) JSON");
  canonical->add_option("file", *canonical_file, "spec JSON file")->required()->check(CLI::ExistingFile);
  canonical->callback(
      [canonical_file] { fmt::print("{}\n", canonical_json(load_spec_file(*canonical_file))); });
}

}  // namespace

ROPEJIT_COMMAND(10, add_spec_command);

}  // namespace ropejit::cli
