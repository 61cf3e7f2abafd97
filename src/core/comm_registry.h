// The set of live communicators. A handle from the API is checked against it
// before anything reads the memory it points to, so a call on a destroyed,
// aborted or never-initialised communicator is refused without touching
// freed (or foreign) memory.
//
// Lookups take no lock and no locked instruction: they are on the path of
// every call, the 8-byte repeat included. Changes (init, destroy) take a
// mutex. The table is open-addressed and insert-only: each address ever used
// by a communicator keeps its slot, whose low bit says whether a live
// communicator is there now (communicators are 16-byte aligned), so no slot
// is ever emptied under a lookup. When it fills, a larger copy is published
// and the old one is kept, because a lookup may still be reading it: the
// memory kept is less than twice the largest table, and the tables grow only
// with the number of distinct addresses (the allocator reuses a destroyed
// communicator's address for the next one).
#pragma once

namespace weft::core {

// Marks `comm` live (idempotent).
void registerComm(const void* comm);
// Marks it dead (idempotent); from then on isLiveComm(comm) is false.
void unregisterComm(const void* comm);
// Whether `comm` is live now. Lock-free.
bool isLiveComm(const void* comm);

}  // namespace weft::core
