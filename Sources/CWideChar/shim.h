// glibc's wcwidth(3) and the per-thread locale calls, which <wchar.h> declares only under the
// X/Open feature macro (Swift's Glibc module is built without it).
#define _XOPEN_SOURCE 700
#include <locale.h>
#include <wchar.h>
