/* display.c - display transform (placeholder). */
#include "display.h"
