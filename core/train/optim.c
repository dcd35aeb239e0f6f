/* optim.c - placeholder until written */
