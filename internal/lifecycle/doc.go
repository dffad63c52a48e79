// Package lifecycle holds the rules of a TrainJob's life that every part of
// the product asks, and none re-derives: who manages it, whether and when it
// finished, when its active deadline falls (and when it is paused), and
// when it is deleted, by its own TTL or a retention policy, or never. They
// are pure functions of a TrainJob and the cluster's retention policy: the
// controllers act on them, the webhook checks with them, trainctl shows
// them, and the benchmarks measure against them.
package lifecycle
