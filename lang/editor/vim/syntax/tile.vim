" Vim syntax for the tile kernel language (spec/lexical.md).
" Install: copy vim/ into ~/.vim (or add lang/editor/vim to 'runtimepath').
if exists("b:current_syntax")
  finish
endif

syn keyword tileKeyword kernel fn let var const if else for in while return as import
syn keyword tileBoolean true false
syn keyword tileConstant None inf nan
syn keyword tileType i1 i8 i16 i32 i64 u8 u16 u32 u64 f8e4m3 f8e5m2 f16 bf16 f32 f64 bool tensor type
syn keyword tileContextual range align multiple_of
syn keyword tileBuiltin device_print device_assert program_id num_programs cluster_id cluster_rank num_clusters cluster_size arange zeros full load store load_block store_block dot
syn keyword tileBuiltin sum max min argmax argmin cumsum maximum minimum where fma cdiv
syn keyword tileBuiltin exp exp2 log log2 sqrt rsqrt sin cos tanh erf sigmoid floor ceil abs
syn keyword tileBuiltin broadcast_to reshape trans expand_dims bitcast static_assert static_print
syn keyword tileBuiltin atomic_add atomic_max atomic_min atomic_and atomic_or atomic_xor atomic_xchg atomic_cas fence wait_turn pass_turn

syn match tileAnnotation "@\h\w*"
syn match tileNumber "\<0[xX][0-9a-fA-F_]\+\>"
syn match tileNumber "\<0[bB][01_]\+\>"
syn match tileNumber "\<\d[0-9_]*\(\.[0-9_]*\)\=\([eE][+-]\=\d\+\)\=\>"
syn region tileString start=+"+ skip=+\\\\\|\\"+ end=+"+ oneline
syn keyword tileTodo TODO FIXME XXX contained
syn match tileComment "//.*$" contains=tileTodo
syn region tileComment start="/\*" end="\*/" contains=tileTodo

hi def link tileKeyword Keyword
hi def link tileBoolean Boolean
hi def link tileConstant Constant
hi def link tileType Type
hi def link tileContextual Keyword
hi def link tileBuiltin Function
hi def link tileAnnotation PreProc
hi def link tileNumber Number
hi def link tileString String
hi def link tileComment Comment
hi def link tileTodo Todo

let b:current_syntax = "tile"
