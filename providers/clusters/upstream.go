package clusters

// InputChannelSize is the upstream design's size of the buffer that carried
// added clusters to the provider's loop. Here Add publishes a cluster to the
// fleet engine directly, so nothing is buffered and this constant tunes
// nothing: it is kept, as a constant, for programs that read it.
const InputChannelSize = 0
