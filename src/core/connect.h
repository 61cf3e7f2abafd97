// Choosing a transport per peer and establishing connections, in phases so
// no rank ever waits on a peer that is itself waiting: first every receiver
// allocates its FIFOs and posts their descriptions over bootstrap, then every
// sender collects the descriptions it needs and attaches, then every link
// whose transport has a handshake left (the network's connect and accept) is
// polled in turn, all together, until each is finished: a network whose
// connect completes only once the peer accepts never stalls on one link
// while this rank's own accepts wait.
#pragma once

#include <vector>

#include "common/status.h"
#include "transport/transport.h"

namespace weft::core {

struct Comm;

struct ConnectNeed {
  Comm* comm;
  int channel;
  int peer;
  bool isSend;
};

// The transport this rank uses to receive from `peer`, or an error naming
// both ranks, their hosts and the setting that ruled each transport out.
Result<const transport::Transport*> selectTransport(const Comm& comm, int peer);

// Connects every need not yet connected. Needs may span communicators driven
// by the same thread (a group), which is why every phase loops over all.
Status connectPeers(const std::vector<ConnectNeed>& needs);

}  // namespace weft::core
