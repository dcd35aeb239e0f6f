/* trainmodel-dec.c - placeholder until written */
