/* trainmodel.c - placeholder until written */
