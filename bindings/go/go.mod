module libfmha.dev/fmha

go 1.19
