/* trainmodel-enc.c - placeholder until written */
