/* placeholder: being written */
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    (void)d;
    (void)n;
    return 0;
}
