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

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Values of the status server's labels.
const (
	// Reports: written (alone, or as the newest of its interval), or
	// coalesced (a newer report of the same TrainJob replaced it before
	// its write).
	ReportWritten   = "written"
	ReportCoalesced = "coalesced"
	// Writes of trainerStatus.
	WriteSucceeded = "succeeded"
	WriteFailed    = "failed"
)

var (
	// StatusRequests counts the status server's requests by HTTP status.
	StatusRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "status_server_requests_total",
		Help:      "Progress reports the status server answered, by HTTP status code (200 accepted; 4xx refused, nothing written).",
	}, []string{"code"})

	// StatusReports counts accepted reports by what became of them.
	StatusReports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "status_server_reports_total",
		Help:      "Accepted progress reports: coalesced (a newer report of the same TrainJob replaced it before its write) or written.",
	}, []string{"result"})

	// StatusWrites counts the writes of status.trainerStatus.
	StatusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "status_server_writes_total",
		Help:      "Writes of TrainJobs' status.trainerStatus by the status server, by result (succeeded, failed).",
	}, []string{"result"})
)
