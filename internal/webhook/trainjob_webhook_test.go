package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func reader(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(trainer.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

func TestValidateCreate(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	cases := map[string]struct {
		trainJob     *trainer.TrainJob
		funcs        *interceptor.Funcs
		wantWarnings admission.Warnings
		wantErrs     []string
	}{
		"valid": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").NumNodes(2).TTL(3600).Deadline(7200).Obj(),
		},
		"TTL under a minute: warning": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").TTL(30).Obj(),
			wantWarnings: admission.Warnings{"spec.ttlSecondsAfterFinished: 30: the TrainJob, its Jobs and its Pods' logs are deleted 30s after it finishes; there may be no time to look at them (60s or more is recommended)"},
		},
		"TTL 0: warning": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").TTL(0).Obj(),
			wantWarnings: admission.Warnings{"spec.ttlSecondsAfterFinished: 0: the TrainJob, its Jobs and its Pods' logs are deleted 0s after it finishes; there may be no time to look at them (60s or more is recommended)"},
		},
		"runtime missing: warning": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").RuntimeRef(trainer.TrainingRuntimeKind, "mine").Obj(),
			wantWarnings: admission.Warnings{`spec.runtimeRef: TrainingRuntime "mine" does not exist in namespace ns; the TrainJob will wait until it does`},
		},
		"runtime unreadable: warning, not a rejection": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").Obj(),
			funcs: &interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errors.New("connection refused")
			}},
			wantWarnings: admission.Warnings{`spec.runtimeRef: could not read ClusterTrainingRuntime "torch-distributed": connection refused`},
		},
		"reserved torch variable: rejected": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").Env("PET_NODE_RANK", "0").Obj(),
			wantErrs: []string{`TrainJob.trainer.kubeflow.org "tj" is invalid`, "spec.trainer.env[0].name: Forbidden: PET_NODE_RANK is set by the torch runtime"},
		},
		"name too long for its Pods' hostnames: rejected": {
			trainJob: utiltesting.MakeTrainJob(strings.Repeat("x", 60), "ns").Obj(),
			wantErrs: []string{"metadata.name", "too long for runtime ClusterTrainingRuntime/torch-distributed"},
		},
		"managed elsewhere: runtime not checked": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").RuntimeRef(trainer.TrainingRuntimeKind, "mine").
				Env("PET_NODE_RANK", "0").ManagedBy("kueue.x-k8s.io/multikueue").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := NewTrainJobValidator(reader(t, tc.funcs, torch))
			warnings, err := v.ValidateCreate(context.Background(), tc.trainJob)
			if diff := cmp.Diff(tc.wantWarnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			checkErr(t, err, tc.wantErrs)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	finished := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCompletedReason, LastTransitionTime: metav1.NewTime(time.Now())}
	running := utiltesting.MakeTrainJob("tj", "ns")
	done := running.Clone().Condition(finished)
	cases := map[string]struct {
		oldTJ, newTJ *trainer.TrainJob
		wantWarnings admission.Warnings
		wantErrs     []string
	}{
		"suspend a running TrainJob": {
			oldTJ: running.Clone().Obj(),
			newTJ: running.Clone().Suspend(true).Obj(),
		},
		"suspend a finished TrainJob: rejected": {
			oldTJ:    done.Clone().Obj(),
			newTJ:    done.Clone().Suspend(true).Obj(),
			wantErrs: []string{"spec.suspend: Forbidden: the TrainJob finished (Complete, AllJobsCompleted); a finished TrainJob cannot be suspended"},
		},
		"resume a TrainJob that failed while suspended": {
			oldTJ: done.Clone().Suspend(true).Obj(),
			newTJ: done.Clone().Suspend(false).Obj(),
		},
		"extend the TTL of a finished TrainJob": {
			oldTJ: done.Clone().TTL(60).Obj(),
			newTJ: done.Clone().TTL(3600).Obj(),
		},
		"shorten the TTL under a minute: warning": {
			oldTJ:        done.Clone().TTL(3600).Obj(),
			newTJ:        done.Clone().TTL(5).Obj(),
			wantWarnings: admission.Warnings{"spec.ttlSecondsAfterFinished: 5: the TrainJob, its Jobs and its Pods' logs are deleted 5s after it finishes; there may be no time to look at them (60s or more is recommended)"},
		},
		"unchanged short TTL: no repeated warning": {
			oldTJ: done.Clone().TTL(5).Label("a", "b").Obj(),
			newTJ: done.Clone().TTL(5).Obj(),
		},
		"extend the deadline of a running TrainJob": {
			oldTJ: running.Clone().Deadline(60).Obj(),
			newTJ: running.Clone().Deadline(600).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := NewTrainJobValidator(reader(t, nil))
			warnings, err := v.ValidateUpdate(context.Background(), tc.oldTJ, tc.newTJ)
			if diff := cmp.Diff(tc.wantWarnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			checkErr(t, err, tc.wantErrs)
		})
	}
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}
