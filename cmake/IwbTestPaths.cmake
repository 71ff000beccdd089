# Paths compiled into tests are relative to the build folder (tests/test_paths.h makes them
# absolute at run time): an absolute path inside a macro is part of every test object's ccache
# key, which base_dir does not rewrite, so a fresh clone in another folder (CI) recompiled every
# test source even with a warm cache.

# iwb_build_relative(OUT path) sets OUT to `path` relative to the build folder.
function(iwb_build_relative out path)
  cmake_path(SET normal NORMALIZE "${path}")
  file(RELATIVE_PATH relative "${PROJECT_BINARY_DIR}" "${normal}")
  set(${out} "${relative}" PARENT_SCOPE)
endfunction()
