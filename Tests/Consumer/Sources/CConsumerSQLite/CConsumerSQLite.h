#ifndef CCONSUMERSQLITE_H
#define CCONSUMERSQLITE_H

#include <sqlite3.h>

#endif
