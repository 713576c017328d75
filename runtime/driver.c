/* driver.c - loads the CUDA driver with dlopen and resolves its functions.
 *
 * libtile never links libcuda: a program using it must start on a machine
 * without a GPU and report "no CUDA driver" as an error value. So the
 * driver is opened at runtime creation and every entry point is looked up
 * by the versioned name that cuda.h maps the API name to (cuMemAlloc is
 * exported as cuMemAlloc_v2, and so on; see TILERT_DRIVER_FUNCTIONS in
 * internal.h). Calling an unversioned legacy export instead would silently
 * get the old ABI, for example 32-bit sizes.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

/* The soname of the driver library installed with the NVIDIA driver. */
#define DRIVER_LIBRARY "libcuda.so.1"

typedef struct driver_symbol {
  const char *name;
  const char *fallback;
  size_t offset; /* of the function pointer in tilert_driver */
  bool required;
} driver_symbol;

static const driver_symbol driver_symbols[] = {
#define TILERT_DRIVER_ENTRY(field, type, symbol, fallback, required)                                                   \
  {symbol, fallback, offsetof(tilert_driver, field), required},
    TILERT_DRIVER_FUNCTIONS(TILERT_DRIVER_ENTRY)
#undef TILERT_DRIVER_ENTRY
};

/* Stores a dlsym result into a function pointer field. POSIX guarantees a
 * function pointer and void * have the same representation. */
static void store_symbol(tilert_driver *drv, size_t offset, void *sym) {
  memcpy((char *)drv + offset, &sym, sizeof sym);
}

static void *find_symbol(void *library, const driver_symbol *s) {
  void *sym = dlsym(library, s->name);
  if (!sym && s->fallback) sym = dlsym(library, s->fallback);
  return sym;
}

tile_status tilert_driver_open(tilert_driver *drv, const char *library) {
  memset(drv, 0, sizeof *drv);
  if (!library) library = DRIVER_LIBRARY;
  dlerror();
  drv->library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!drv->library) {
    const char *why = dlerror();
    return tilert_fail(TILE_ERROR_NO_DRIVER, "no CUDA driver: %s could not be loaded (%s)", library,
                       why ? why : "unknown reason");
  }
  size_t n = sizeof driver_symbols / sizeof driver_symbols[0];
  for (size_t i = 0; i < n; i++) {
    const driver_symbol *s = &driver_symbols[i];
    void *sym = find_symbol(drv->library, s);
    if (!sym && s->required) {
      tilert_driver_close(drv);
      return tilert_fail(TILE_ERROR_NO_DRIVER,
                         "no usable CUDA driver: %s has no function %s (the driver is too old or not "
                         "libcuda)",
                         library, s->name);
    }
    store_symbol(drv, s->offset, sym);
  }
  return TILE_OK;
}

void tilert_driver_close(tilert_driver *drv) {
  if (drv->library) dlclose(drv->library);
  memset(drv, 0, sizeof *drv);
}
