/* header.c - the C header tilec writes for ahead-of-time use
 * (--emit=header): per kernel, its metadata text and a launch function
 * with typed parameters over libtile's tile_launch; with --embed, the
 * cubin as a byte array and a loader, so a C program needs only the header
 * and libtile.
 *
 * A tensor<T, R> parameter is a const tile_tensor * (pointer, shape,
 * strides): libtile encodes the TMA descriptor from it and the box and
 * swizzle in the metadata. Every name starts with the header's name (its
 * guard), so headers of several specializations of one kernel can be
 * included together:
 *
 *   tile_module *mod;  softmax_f32_load(rt, &mod);          (with --embed)
 *   tile_kernel *k;    tile_kernel_get(mod, "softmax", &k);
 *   softmax_f32_softmax_launch(k, rows, 1, 1, NULL, out, x, n, stride);
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compilation.h"

/* Bytes per line of the embedded cubin array. */
#define HEADER_BYTES_PER_LINE 16

static const char *c_param_type(TType t) {
  switch ((ScalarKind)t.kind) {
  case SK_PTR: return "uint64_t";
  case SK_I1: return "bool";
  case SK_I8: return "int8_t";
  case SK_I16: return "int16_t";
  case SK_I32: return "int32_t";
  case SK_I64: return "int64_t";
  case SK_U8: return "uint8_t";
  case SK_U16: return "uint16_t";
  case SK_U32: return "uint32_t";
  case SK_U64: return "uint64_t";
  case SK_F64: return "double";
  case SK_DESC: return "const tile_tensor *"; /* libtile encodes the CUtensorMap */
  default: return "float"; /* f32, and f16/bf16 passed as float and converted */
  }
}

static const char *arg_maker(TType t) {
  switch ((ScalarKind)t.kind) {
  case SK_PTR: return "tile_arg_ptr";
  case SK_I1: return "tile_arg_bool";
  case SK_I8: case SK_I16: case SK_I32: return "tile_arg_i32";
  case SK_I64: return "tile_arg_i64";
  case SK_U8: case SK_U16: case SK_U32: return "tile_arg_u32";
  case SK_U64: return "tile_arg_u64";
  case SK_F64: return "tile_arg_f64";
  case SK_DESC: return "tile_arg_tensor";
  default: return "tile_arg_f32";
  }
}

/* A kernel parameter's name as a C identifier in the launch function: the
 * name itself unless it is a C keyword or a name the function uses, then
 * with a trailing underscore. */
static const char *c_name(const char *name, char *buf, size_t size) {
  static const char *const reserved[] = {
      "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
      "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
      "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
      "true", "false", "kernel", "grid_x", "grid_y", "grid_z", "stream", "args", "grid"};
  bool clash = name[0] == '_'; /* reserved for the implementation in C */
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0] && !clash; i++) clash = !strcmp(name, reserved[i]);
  if (!clash) return name;
  snprintf(buf, size, "%s_", name);
  return buf;
}

static void put_c_string(StrBuf *sb, const char *s) {
  sb_putc(sb, '"');
  for (; *s; s++) {
    if (*s == '\n') sb_puts(sb, s[1] ? "\\n\"\n         \"" : "\\n");
    else if (*s == '"' || *s == '\\') sb_printf(sb, "\\%c", *s);
    else sb_putc(sb, *s);
  }
  sb_putc(sb, '"');
}

static void emit_kernel(StrBuf *sb, const char *prefix, const Func *f, const char *meta) {
  sb_printf(sb, "/* Kernel %s: its metadata as stored in the module. */\nstatic inline const char *%s_%s_meta(void) {\n"
                "  return ",
            f->name, prefix, f->name);
  put_c_string(sb, meta);
  sb_puts(sb, ";\n}\n\n");
  sb_printf(sb, "static inline tile_status %s_%s_launch(const tile_kernel *kernel, uint32_t grid_x, uint32_t grid_y,\n"
                "    uint32_t grid_z, tile_stream *stream",
            prefix, f->name);
  char buf[300];
  for (uint32_t i = 0; i < f->body.nargs; i++) {
    const char *type = c_param_type(f->body.args[i].type);
    bool pointer = type[strlen(type) - 1] == '*'; /* "const tile_tensor *d", not "* d" */
    sb_printf(sb, ",\n    %s%s%s", type, pointer ? "" : " ", c_name(f->params[i].name, buf, sizeof buf));
  }
  sb_puts(sb, ") {\n");
  uint32_t n = f->body.nargs;
  sb_printf(sb, "  tile_arg args[%u] = {", n ? n : 1);
  for (uint32_t i = 0; i < n; i++)
    sb_printf(sb, "%s%s(%s)", i ? ", " : "", arg_maker(f->body.args[i].type), c_name(f->params[i].name, buf, sizeof buf));
  if (!n) sb_puts(sb, "{0}");
  sb_puts(sb, "};\n");
  sb_puts(sb, "  const uint32_t grid[3] = {grid_x, grid_y, grid_z};\n");
  sb_printf(sb, "  return tile_launch(kernel, grid, stream, args, %u);\n}\n\n", n);
}

char *tc_emit_header(const tc_compilation *c, const char *guard_name, bool embed) {
  if (!c->generated) return NULL;
  if (embed && !c->cubin) return NULL;
  char guard[256];
  size_t g = 0;
  for (const char *s = guard_name && *guard_name ? guard_name : "tile_kernels"; *s && g + 1 < sizeof guard; s++)
    guard[g++] = isalnum((unsigned char)*s) ? (char)tolower((unsigned char)*s) : '_';
  guard[g] = 0;
  if (isdigit((unsigned char)guard[0])) guard[0] = '_';
  StrBuf sb;
  sb_init(&sb);
  sb_printf(&sb, "/* %s.h - generated by tilec %s from %s; do not edit.\n", guard, TILEC_VERSION, c->src.name);
  sb_puts(&sb, " * Launch functions for libtile (runtime/tile.h); arguments are checked\n"
               " * against each kernel's metadata at launch. */\n");
  for (char *p = guard; *p; p++) *p = (char)toupper((unsigned char)*p);
  sb_printf(&sb, "#ifndef %s_H\n#define %s_H\n\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n"
                 "#include \"tile.h\"\n\n",
            guard, guard);
  for (char *p = guard; *p; p++) *p = (char)tolower((unsigned char)*p);
  for (int i = 0; i < c->module->nfuncs; i++) emit_kernel(&sb, guard, c->module->funcs[i], c->code[i].meta);
  if (embed) {
    sb_printf(&sb, "/* The cubin holding every kernel above (sm_90a). */\nstatic const unsigned char %s_cubin[%zu] = {",
              guard, c->cubin_size);
    for (size_t i = 0; i < c->cubin_size; i++)
      sb_printf(&sb, "%s0x%02x,", i % HEADER_BYTES_PER_LINE ? " " : "\n    ", c->cubin[i]);
    sb_puts(&sb, "\n};\n\n");
    sb_printf(&sb, "static inline tile_status %s_load(tile_runtime *rt, tile_module **module) {\n"
                   "  return tile_module_load(rt, %s_cubin, sizeof %s_cubin, module);\n}\n\n",
              guard, guard, guard);
  }
  for (char *p = guard; *p; p++) *p = (char)toupper((unsigned char)*p);
  sb_printf(&sb, "#endif /* %s_H */\n", guard);
  return sb_take(&sb);
}
