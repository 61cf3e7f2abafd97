// Turns a failed wait on the data path into the message users read: what
// the rank was doing, whom it waited on, where that peer lives, and what to
// do about it.
#pragma once

#include "common/status.h"
#include "device/wait_report.h"

namespace weft::core {

struct Comm;

// A network failure whose peer is alive (its bootstrap listener answers) is
// the link's, not the peer's: the message names the link and how to run
// without it (WEFT_BROKEN_LINKS).
Status describeWaitFailure(const Comm& comm, const device::WaitFailureInfo& failure);

// Test hook: the link between this rank and `peer` fails at run time as a
// network link does (the flag the proxy raises, with the link known): the
// call waiting fails, naming the link and `why`.
void injectLinkFailure(Comm* comm, int peer, const std::string& why);

// Failure propagation (docs/architecture.md, "When a rank fails").
//
// Connects the communicator to its bootstrap's failure notices: a notice
// marks it failed (state, async error) and raises the flag its host waits
// poll, or on the cuda backend its kernels' abort flag, so pending calls end
// at their next check and the next call returns the notice's error.
void watchFailureNotices(Comm* comm);
// Stops that before the communicator is freed (waits for a handler running).
void unwatchFailureNotices(Comm* comm);
// Tells every peer, once per communicator, that rank `origin` failed (a peer
// found dead or silent, or this rank aborting) and why. Nothing is sent when
// the failure came from another rank's notice: that rank told everyone.
void reportFailure(Comm* comm, int origin, const Status& why);
// Init failed on this rank: tell every peer (once). A failure that came
// from a notice is passed on too: during init a notice may have reached only
// this rank (passed along the ring before the addresses were exchanged).
void reportInitFailure(Comm* comm, const Status& why);
// The rank a failed wait names (the peer waited on), or this rank.
int failureOrigin(const Comm& comm, const device::WaitFailureInfo& failure);
// The error of a received notice, or ok when none was received.
Status noticedFailure(const Comm& comm);
// Before a failed wait blames the peer it waited on, how long it waits for a
// notice naming another rank (true when one came): a peer that exited may
// have left because of another rank's failure, and a peer that timed out
// while running was itself waiting on the rank that stopped, whose own
// waiter reports it at once (it sees the process stopped).
constexpr int kNoticeGraceMs = 500;
constexpr int kTimeoutNoticeGraceMs = 1500;
bool awaitNotice(const Comm& comm, int graceMs = kNoticeGraceMs);
// How long a failed wait gives others to report first (0: blame at once).
int noticeGraceMs(const Comm& comm, const device::WaitFailureInfo& failure);
// The same for a connection made on first use that failed on the rank its
// bootstrap suspects (found gone, or silent past WEFT_TIMEOUT): the rank
// waited on may itself be waiting on the one that failed.
int connectNoticeGraceMs(const Comm& comm);

}  // namespace weft::core
