/* grad.c - placeholder until written */
