#define DIMS 2
