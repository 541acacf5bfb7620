// Host backend: Clang 19 compiles the generated CUDA source (with the host shim force-included)
// to LLVM IR in process; an ORC LLJIT per module turns it into machine code; launch() loops
// the grid on CPU threads through a launcher function generated next to the kernel: a plain
// loop over blocks and threads, or, for a kernel that calls a warp or block collective, the
// fiber launcher of cooperative.h.
// Built with -fno-rtti (LLVM headers): no dynamic_cast/typeid here.
#include "ropejit/internal/host_jit.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Driver/Compilation.h>
#include <clang/Driver/Driver.h>
#include <clang/Driver/Job.h>
#include <clang/Driver/Tool.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <fmt/format.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/host/cooperative.h"
#include "ropejit/embedded_templates.h"
#include "ropejit/error.h"

// libgcc's emulated-TLS entry point (JIT code reaches thread_local variables through it).
extern "C" void* __emutls_get_address(void*);

namespace ropejit {
namespace {

// Virtual paths: only the in-memory overlay holds them; nothing is read from the source tree.
constexpr const char* kVirtualIncludeDir = "/ropejit-host/include";
constexpr const char* kVirtualMainFile = "/ropejit-host/kernel.cpp";
constexpr const char* kShimInclude = "ropejit/host_shim.cuh";
// The driver only uses this path to name itself; the resource dir is passed explicitly.
constexpr const char* kClangExecutable = ROPEJIT_CLANG_RESOURCE_DIR "/../../../bin/clang++";

// Flags that shape the code (the cache key holds them): exact IEEE results, no contraction into
// FMA, no fast-math; errno is never read.
constexpr const char* kCompileFlags[] = {"-x", "c++", "-std=c++17", "-O2", "-march=native",
                                         "-ffp-contract=off", "-fno-math-errno", "-fno-exceptions",
                                         "-fno-rtti"};

/// Signature of the generated launcher (see launcher_source).
using LaunchFn = void (*)(const KernelParams*, unsigned, unsigned, unsigned, unsigned, unsigned,
                          unsigned, unsigned long long, unsigned long long);

// Grids with fewer threads than this run on the calling thread: spawning costs more.
constexpr unsigned long long kMinThreadsPerWorker = 1ull << 14;

void initialize_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

bool is_c_identifier(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

std::string launcher_symbol(const std::string& entry) { return "ropejit_host_launch_" + entry; }
std::string cooperative_launcher_symbol(const std::string& entry) {
  return "ropejit_host_coop_launch_" + entry;
}
std::string thread_symbol(const std::string& entry) { return "ropejit_host_thread_" + entry; }

// Appended after the kernel source in the same TU so LLVM can inline the per-thread call.
// Block indices are flattened x fastest, as CUDA numbers them. Both launchers are compiled;
// keep_one_launcher drops one before code generation.
std::string launcher_source(const std::string& entry) {
  return fmt::format(R"(
// ---- ropejit host launcher ----
extern "C" void {0}(const ropejit::KernelParams* ropejit_p, unsigned gx, unsigned gy,
    unsigned gz, unsigned bx, unsigned by, unsigned bz,
    unsigned long long block_begin, unsigned long long block_end) {{
  gridDim = dim3(gx, gy, gz);
  blockDim = dim3(bx, by, bz);
  uint3* const ropejit_block_idx = &blockIdx;
  uint3* const ropejit_thread_idx = &threadIdx;
  const ropejit::KernelParams ropejit_params = *ropejit_p;
  const unsigned long long gxy = (unsigned long long)gx * gy;
  for (unsigned long long b = block_begin; b < block_end; ++b) {{
    ropejit_block_idx->x = (unsigned)(b % gx);
    ropejit_block_idx->y = (unsigned)((b / gx) % gy);
    ropejit_block_idx->z = (unsigned)(b / gxy);
    for (unsigned tz = 0; tz < bz; ++tz)
      for (unsigned ty = 0; ty < by; ++ty)
        for (unsigned tx = 0; tx < bx; ++tx) {{
          ropejit_thread_idx->x = tx;
          ropejit_thread_idx->y = ty;
          ropejit_thread_idx->z = tz;
          {1}(ropejit_params);
        }}
  }}
}}
// ---- ropejit cooperative launcher: one fiber per thread (cooperative.h) ----
extern "C" void ropejit_coop_run_blocks(void (*)(const ropejit::KernelParams*, const unsigned*),
    const ropejit::KernelParams*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
    unsigned long long, unsigned long long);
extern "C" void {3}(const ropejit::KernelParams* p, const unsigned* d) {{
  gridDim = dim3(d[0], d[1], d[2]);
  blockDim = dim3(d[3], d[4], d[5]);
  blockIdx = uint3{{d[6], d[7], d[8]}};
  threadIdx = uint3{{d[9], d[10], d[11]}};
  // Not inlined: the kernel body is optimised once more only in the launcher that is kept.
  [[clang::noinline]] {1}(*p);
}}
extern "C" void {2}(const ropejit::KernelParams* ropejit_p, unsigned gx, unsigned gy,
    unsigned gz, unsigned bx, unsigned by, unsigned bz,
    unsigned long long block_begin, unsigned long long block_end) {{
  ropejit_coop_run_blocks(&{3}, ropejit_p, gx, gy, gz, bx, by, bz, block_begin, block_end);
}}
)",
                     launcher_symbol(entry), entry, cooperative_launcher_symbol(entry),
                     thread_symbol(entry));
}

/// True when the optimised module still calls a collective's support function.
bool calls_collectives(const llvm::Module& module) {
  for (const llvm::Function& function : module) {
    const llvm::StringRef name = function.getName();
    if (function.isDeclaration() && name.starts_with(kCooperativePrimitivePrefix) &&
        name != kCooperativeRunBlocks && !function.use_empty())
      return true;
  }
  return false;
}

/// Keeps the fiber launcher, under the plain launcher's name, for a kernel that calls a
/// collective, else the plain one: collective-free kernels keep the plain loop's speed.
void keep_one_launcher(llvm::Module& module, const std::string& entry) {
  llvm::Function* plain = module.getFunction(launcher_symbol(entry));
  llvm::Function* cooperative = module.getFunction(cooperative_launcher_symbol(entry));
  llvm::Function* thread = module.getFunction(thread_symbol(entry));
  if (!plain || !cooperative || !thread)
    throw Error(Status::internal, "host backend: a launcher of '" + entry + "' is missing");
  if (calls_collectives(module)) {
    plain->eraseFromParent();
    cooperative->setName(launcher_symbol(entry));
  } else {
    cooperative->eraseFromParent();
    thread->eraseFromParent();
  }
}

/// In-memory file system holding the embedded templates and the main file, over the real one
/// (the real one supplies system and Clang resource headers).
llvm::IntrusiveRefCntPtr<llvm::vfs::FileSystem> make_file_system(const std::string& main_text) {
  auto memory = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
  for (const EmbeddedFile& file : embedded_templates()) {
    memory->addFile(std::string(kVirtualIncludeDir) + "/" + std::string(file.name), 0,
                    llvm::MemoryBuffer::getMemBuffer(file.text, file.name, false));
  }
  memory->addFile(kVirtualMainFile, 0,
                  llvm::MemoryBuffer::getMemBufferCopy(main_text, kVirtualMainFile));
  auto overlay =
      llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::getRealFileSystem());
  overlay->pushOverlay(memory);
  return overlay;
}

/// First "error:" line of a diagnostics log, for the exception message.
std::string first_error_line(const std::string& log) {
  size_t at = log.find("error:");
  if (at == std::string::npos) return log.substr(0, log.find('\n'));
  size_t begin = log.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return log.substr(begin, log.find('\n', at) - begin);
}

std::string to_string(llvm::Error error) { return llvm::toString(std::move(error)); }

struct ClangResult {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
};

/// Clang front end + IR optimisation of `main_text`; throws Error(compile_error) with the log.
ClangResult compile_to_ir(const std::string& main_text, const std::string& entry) {
  std::string log;
  llvm::raw_string_ostream log_stream(log);
  auto diag_options = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  diag_options->ShowColors = false;
  clang::TextDiagnosticPrinter printer(log_stream, diag_options.get());
  clang::DiagnosticsEngine driver_diags(llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(),
                                        diag_options, &printer, false);
  auto file_system = make_file_system(main_text);

  // The driver finds the GCC installation and system include dirs, as `clang++ -c` would.
  clang::driver::Driver driver(kClangExecutable, llvm::sys::getProcessTriple(), driver_diags,
                               "ropejit host backend", file_system);
  const std::string include_flag = std::string("-I") + kVirtualIncludeDir;
  std::vector<const char*> args = {kClangExecutable};
  for (const char* flag : kCompileFlags) args.push_back(flag);
  for (const char* flag : {"-resource-dir", ROPEJIT_CLANG_RESOURCE_DIR, include_flag.c_str(),
                           "-include", kShimInclude, "-c", kVirtualMainFile})
    args.push_back(flag);
  std::unique_ptr<clang::driver::Compilation> compilation(driver.BuildCompilation(args));
  if (!compilation || driver_diags.hasErrorOccurred()) {
    log_stream.flush();
    throw Error(Status::backend_error,
                "host backend: clang driver failed: " + first_error_line(log), "", log);
  }
  const clang::driver::JobList& jobs = compilation->getJobs();
  if (jobs.size() != 1 || std::string(jobs.begin()->getCreator().getName()) != "clang") {
    throw Error(Status::internal, "host backend: clang driver did not produce one cc1 job");
  }
  llvm::opt::ArgStringList cc1_args = jobs.begin()->getArguments();
  if (!cc1_args.empty() && std::string(cc1_args.front()) == "-cc1")
    cc1_args.erase(cc1_args.begin());

  auto invocation = std::make_shared<clang::CompilerInvocation>();
  clang::CompilerInvocation::CreateFromArgs(*invocation, cc1_args, driver_diags, kClangExecutable);
  // The driver asks to leak memory at exit (a one-shot process); we live on.
  invocation->getFrontendOpts().DisableFree = false;
  invocation->getCodeGenOpts().DisableFree = false;
  invocation->getDiagnosticOpts().ShowColors = false;

  clang::CompilerInstance instance;
  instance.setInvocation(invocation);
  instance.setVerboseOutputStream(log_stream);  // "N errors generated." goes to the log
  instance.createDiagnostics(&printer, false);
  instance.createFileManager(file_system);

  ClangResult result;
  result.context = std::make_unique<llvm::LLVMContext>();
  clang::EmitLLVMOnlyAction action(result.context.get());
  const bool ok = instance.ExecuteAction(action) && !driver_diags.hasErrorOccurred();
  log_stream.flush();
  if (!ok) {
    throw Error(Status::compile_error,
                "host backend: clang rejected kernel '" + entry + "': " + first_error_line(log), "",
                log);
  }
  result.module = action.takeModule();
  if (!result.module)
    throw Error(Status::internal, "host backend: clang produced no module", "", log);
  return result;
}

void launch_grid(LaunchFn launch_fn, const HostLaunchDims& d, const KernelParams& params) {
  if (!d.grid_x || !d.grid_y || !d.grid_z || !d.block_x || !d.block_y || !d.block_z) {
    throw Error(Status::invalid_argument, "host launch: grid and block sizes must all be >= 1");
  }
  const unsigned long long total_blocks =
      static_cast<unsigned long long>(d.grid_x) * d.grid_y * d.grid_z;
  const unsigned long long threads_per_block =
      static_cast<unsigned long long>(d.block_x) * d.block_y * d.block_z;
  // A cooperative launch cannot throw through JIT'd frames: each OS thread keeps its error.
  std::vector<std::optional<Error>> errors;
  auto run_blocks = [&](size_t worker, unsigned long long begin, unsigned long long end) {
    launch_fn(&params, d.grid_x, d.grid_y, d.grid_z, d.block_x, d.block_y, d.block_z, begin, end);
    errors[worker] = take_cooperative_error();
  };
  const unsigned long long workers_by_size =
      std::max(1ull, total_blocks * threads_per_block / kMinThreadsPerWorker);
  const unsigned long long workers =
      std::min({static_cast<unsigned long long>(std::max(1u, std::thread::hardware_concurrency())),
                workers_by_size, total_blocks});
  errors.resize(workers);
  auto throw_first_error = [&] {
    for (std::optional<Error>& error : errors)
      if (error) throw *error;
  };
  if (workers <= 1) {
    run_blocks(0, 0, total_blocks);
    throw_first_error();
    return;
  }
  // Even contiguous chunks; the calling thread takes the first.
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  auto chunk_begin = [&](unsigned long long w) { return total_blocks * w / workers; };
  for (unsigned long long w = 1; w < workers; ++w) {
    threads.emplace_back(run_blocks, w, chunk_begin(w), chunk_begin(w + 1));
  }
  run_blocks(0, 0, chunk_begin(1));
  for (std::thread& thread : threads) thread.join();
  throw_first_error();
}

/// The JIT's target: this CPU, with emulated TLS for the thread_local indices.
llvm::orc::JITTargetMachineBuilder host_target_builder() {
  initialize_llvm_once();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    throw Error(Status::backend_error,
                "host backend: cannot detect the host CPU: " + to_string(builder.takeError()));
  return std::move(*builder);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void check_entry(const std::string& entry) {
  if (!is_c_identifier(entry)) {
    throw Error(Status::invalid_argument,
                "host backend: entry '" + entry + "' is not a C identifier");
  }
}

}  // namespace

struct HostModule::Impl {
  // No deinitialize(): kernels have no static destructors, and at process exit it makes ORC
  // compile a deinit module after parts of LLVM are gone ("Do not know how to split...").
  std::unique_ptr<llvm::orc::LLJIT> jit;
  LaunchFn launch_fn;
  bool cooperative;
  double compile_ms;
};

HostModule::HostModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HostModule::~HostModule() = default;
void HostModule::launch(const HostLaunchDims& dims, const KernelParams& params) const {
  launch_grid(impl_->launch_fn, dims, params);
}
double HostModule::compile_ms() const { return impl_->compile_ms; }
bool HostModule::cooperative() const { return impl_->cooperative; }

std::string HostModule::compile_object(const std::string& source_text, const std::string& entry) {
  check_entry(entry);
  ClangResult ir = compile_to_ir(source_text + launcher_source(entry), entry);
  llvm::orc::JITTargetMachineBuilder builder = host_target_builder();
  auto machine = builder.createTargetMachine();
  if (!machine)
    throw Error(Status::backend_error,
                "host backend: cannot create a target machine: " + to_string(machine.takeError()));
  keep_one_launcher(*ir.module, entry);
  ir.module->setDataLayout((*machine)->createDataLayout());
  ir.module->setTargetTriple((*machine)->getTargetTriple().str());
  // The same compiler LLJIT runs on IR it is given, so a cached object is the code a fresh
  // compile would have linked.
  llvm::orc::SimpleCompiler compiler(**machine);
  auto object = compiler(*ir.module);
  if (!object)
    throw Error(Status::backend_error,
                "host backend: code generation failed for '" + entry + "': " + to_string(object.takeError()));
  return std::string((*object)->getBuffer());
}

std::unique_ptr<HostModule> HostModule::load_object(std::string_view object, const std::string& entry) {
  check_entry(entry);
  const auto start = std::chrono::steady_clock::now();
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(host_target_builder()).create();
  if (!jit)
    throw Error(Status::backend_error,
                "host backend: cannot create LLJIT: " + to_string(jit.takeError()));
  // Process symbols (libm's sinf, libgcc's __emutls_get_address for thread_local indices).
  auto process_symbols = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process_symbols) {
    throw Error(Status::backend_error, "host backend: cannot search process symbols: " +
                                           to_string(process_symbols.takeError()));
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*process_symbols));
  // thread_local indices compile to emulated TLS. Bind its runtime entry to the one this
  // library links: a host loaded with RTLD_LOCAL (Python's ctypes) does not expose libgcc_s
  // to the process-wide search above.
  // The collectives' support functions (cooperative.h) are bound the same way.
  llvm::orc::SymbolMap runtime_symbols = {
      {(*jit)->mangleAndIntern("__emutls_get_address"),
       {llvm::orc::ExecutorAddr::fromPtr(&__emutls_get_address), llvm::JITSymbolFlags::Exported}}};
  for (const auto& [name, address] : cooperative_symbols()) {
    runtime_symbols[(*jit)->mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                                      llvm::JITSymbolFlags::Exported};
  }
  if (llvm::Error err =
          (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(runtime_symbols))))
    throw Error(Status::backend_error, "host backend: cannot define the runtime symbols: " +
                                           to_string(std::move(err)));
  if (llvm::Error err = (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(object.data(), object.size()), "ropejit-kernel.o"))) {
    throw Error(Status::backend_error,
                "host backend: cannot add the object of '" + entry + "': " + to_string(std::move(err)));
  }
  auto address = (*jit)->lookup(launcher_symbol(entry));
  if (!address) {
    throw Error(Status::backend_error, "host backend: cannot materialize '" + entry +
                                           "': " + to_string(address.takeError()));
  }
  if (llvm::Error err = (*jit)->initialize((*jit)->getMainJITDylib())) {
    throw Error(Status::backend_error,
                "host backend: module initializers failed: " + to_string(std::move(err)));
  }
  // Only a kept fiber launcher leaves the per-thread entry in the object.
  auto thread_entry = (*jit)->lookup(thread_symbol(entry));
  const bool cooperative = static_cast<bool>(thread_entry);
  if (!thread_entry) llvm::consumeError(thread_entry.takeError());
  return std::make_unique<HostModule>(std::make_unique<HostModule::Impl>(HostModule::Impl{
      std::move(*jit), address->toPtr<LaunchFn>(), cooperative, ms_since(start)}));
}

std::unique_ptr<HostModule> HostModule::compile(const std::string& source_text,
                                                const std::string& entry) {
  const auto start = std::chrono::steady_clock::now();
  const std::string object = compile_object(source_text, entry);
  auto module = load_object(object, entry);
  module->impl_->compile_ms = ms_since(start);
  return module;
}

std::string host_jit_target() {
  llvm::orc::JITTargetMachineBuilder builder = host_target_builder();
  return builder.getTargetTriple().str() + " cpu=" + builder.getCPU() + " " +
         builder.getFeatures().getString();
}

std::string host_jit_compiler() { return "clang " LLVM_VERSION_STRING; }

std::string host_jit_flags() {
  std::string text;
  for (const char* flag : kCompileFlags) text += (text.empty() ? "" : " ") + std::string(flag);
  return text;
}

bool host_backend_available() noexcept { return true; }

}  // namespace ropejit
