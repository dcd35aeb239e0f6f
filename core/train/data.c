/* data.c - placeholder until written */
