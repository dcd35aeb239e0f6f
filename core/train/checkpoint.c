/* checkpoint.c - placeholder until written */
