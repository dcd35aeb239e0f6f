/* changelens-cli.c - placeholder. */
int main(void) { return 0; }
