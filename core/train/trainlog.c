/* trainlog.c - placeholder until written */
