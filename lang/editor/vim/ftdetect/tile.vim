" .tile files are tile kernels (lang/editor/README.md).
autocmd BufRead,BufNewFile *.tile setfiletype tile
