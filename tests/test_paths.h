// Where the tests find what the build hands them: the shared models, fixtures in the source
// tree, the built `iwb`. CMake passes each as a path relative to the build folder, never an
// absolute one: ccache's base_dir rewrites absolute paths in compiler arguments but not inside
// a string macro, so an absolute path there made every test object miss the cache in a fresh
// clone (CI's run, about 1,400 CPU seconds of test sources on 2 cores). These functions make
// the paths absolute again from where the running executable lives, so a test runs the same
// from CTest, from a shell in any folder, or from a debugger.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace iwb::test {

// The build folder: the nearest folder above the executable that holds CMakeCache.txt; the
// executable's own folder when none does (a test copied out of the build, as the GPU bundle is).
inline const std::filesystem::path& build_dir() {
  static const std::filesystem::path dir = [] {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    const fs::path start = ec ? fs::current_path() : exe.parent_path();
    for (fs::path p = start; !p.empty(); p = p.parent_path()) {
      if (fs::exists(p / "CMakeCache.txt", ec)) return p;
      if (p == p.root_path()) break;
    }
    return start;
  }();
  return dir;
}

// `relative` (as CMake wrote it, relative to the build folder) made absolute and clean.
inline std::string from_build_dir(std::string_view relative) {
  return (build_dir() / relative).lexically_normal().string();
}

// The built command-line tool (the `iwb` target's output, build/app/iwb).
inline std::string iwb_cli_path() { return from_build_dir("app/iwb"); }

#ifdef IWB_SHARED_MODELS_FROM_BUILD
// ../shared/models by default (the CMake cache variable IWB_SHARED_MODELS_DIR); the variable of
// the same name in the environment wins, for tests run away from their build (the GPU bundle).
inline std::string shared_models_dir() {
  if (const char* env = std::getenv("IWB_SHARED_MODELS_DIR"); env != nullptr && *env != '\0') return env;
  return from_build_dir(IWB_SHARED_MODELS_FROM_BUILD);
}
#endif

}  // namespace iwb::test
