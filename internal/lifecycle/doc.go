/*
Copyright The trainjob-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package lifecycle holds the rules of a TrainJob's life that every part of
// the product asks, and none re-derives: who manages it, whether and when it
// finished, when its active deadline falls (and when it is paused), and
// when it is deleted, by its own TTL or a retention policy, or never. They
// are pure functions of a TrainJob and the cluster's retention policy: the
// controllers act on them, the webhook checks with them, trainctl shows
// them, and the benchmarks measure against them.
package lifecycle
