/* main.c - the ChangeLens application entry point (placeholder). */
#include <adwaita.h>
int main(int argc, char **argv)
{
    return 0;
}
