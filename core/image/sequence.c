/* sequence.c - ordered image sequences (placeholder). */
#include "sequence.h"
