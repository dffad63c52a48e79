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

package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// fakeClient is the API server the webhook reads runtimes from and
// dry-runs Jobs on, holding objs.
func fakeClient(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	return utiltesting.NewClientBuilder(funcs, objs...).WithIndex(&trainer.TrainJob{}, dashPrefixIndex, dashPrefixesOf).Build()
}

func validator(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *TrainJobValidator {
	t.Helper()
	c := fakeClient(t, funcs, objs...)
	return NewTrainJobValidator(c, c)
}

// refuseJobs makes the API server refuse the creation of Jobs with err.
func refuseJobs(err error) *interceptor.Funcs {
	return &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*batchv1.Job); ok {
			return err
		}
		return c.Create(ctx, obj, opts...)
	}}
}

// jobInvalid is the API server's answer to a Job its validation refuses.
func jobInvalid(name string, errs ...*field.Error) error {
	return apierrors.NewInvalid(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), name, errs)
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
			funcs: refuseJobs(jobInvalid("tj-node-0", field.Required(field.NewPath("spec", "completions"), ""))),
		},
		"dispatched by MultiKueue, its Pods requesting nothing: warning": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Obj(),
			wantWarnings: admission.Warnings{"spec.trainer.resourcesPerNode: the TrainJob's Pods request no resources; Kueue v0.19 admits such a TrainJob without its ClusterQueue's admission checks, so MultiKueue never dispatches it and it runs nowhere: set resourcesPerNode to resources the ClusterQueue covers (see docs/multicluster.md)"},
		},
		"dispatched by MultiKueue, a CPU per node: no warning": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").ManagedBy("kueue.x-k8s.io/multikueue").
				Resources(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}).Obj(),
		},
		"managed by an unknown controller: warning": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").ManagedBy("trainer.kubeflow.org/trainjob-controler").Obj(),
			wantWarnings: admission.Warnings{`spec.managedBy: "trainer.kubeflow.org/trainjob-controler" is neither trainer.kubeflow.org/trainjob-controller (trainjob-operator) nor kueue.x-k8s.io/multikueue (Kueue's MultiKueue): trainjob-operator will not run this TrainJob, and unless a controller of that name exists nothing will; managedBy cannot be changed later`},
		},
		"Job refused by the API server: rejected with its message": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").Obj(),
			funcs: refuseJobs(jobInvalid("tj-node-0",
				field.Required(field.NewPath("spec", "template", "spec", "restartPolicy"), `valid values: "OnFailure", "Never"`))),
			wantErrs: []string{
				`TrainJob.trainer.kubeflow.org "tj" is invalid`,
				`runtime[ClusterTrainingRuntime/torch-distributed].spec.template.spec.replicatedJobs[0]: Invalid value: "node": the API server refuses the Jobs of replicated Job "node" of ClusterTrainingRuntime "torch-distributed"`,
				`Job.batch "tj-node-0" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`,
			},
		},
		"Job creation forbidden by a quota: warning, not a rejection": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").Obj(),
			funcs: refuseJobs(apierrors.NewForbidden(batchv1.Resource("jobs"), "tj-node-0",
				errors.New("exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0"))),
			wantWarnings: admission.Warnings{`could not check that the API server accepts Job tj-node-0 of replicated Job "node" (dry run): jobs.batch "tj-node-0" is forbidden: exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=0, limited: count/jobs.batch=0`},
		},
		"Job dry run times out: warning, not a rejection": {
			trainJob:     utiltesting.MakeTrainJob("tj", "ns").Obj(),
			funcs:        refuseJobs(apierrors.NewTimeoutError("request did not complete within requested timeout", 0)),
			wantWarnings: admission.Warnings{`could not check that the API server accepts Job tj-node-0 of replicated Job "node" (dry run): Timeout: request did not complete within requested timeout`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := validator(t, tc.funcs, torch)
			warnings, err := v.ValidateCreate(context.Background(), tc.trainJob)
			if diff := cmp.Diff(tc.wantWarnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			checkErr(t, err, tc.wantErrs)
		})
	}
}

// resources requests cpu CPUs.
func resources(cpu string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
}

// withPatch adds to tj a runtime patch of replicated Job rjob that gives
// container a security context.
func withPatch(tj *trainer.TrainJob, rjob, container string) *trainer.TrainJob {
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/m", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: rjob, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{Name: container, SecurityContext: &corev1.SecurityContext{}}}},
			}}},
		}}}},
	}}}
	return tj
}

// flavorPatch is a runtime patch of manager's as Kueue writes the flavor it
// admits a TrainJob on: a node selector for the Pods of replicated Job node.
func flavorPatch(manager string, nodeSelector map[string]string) trainer.RuntimePatch {
	return trainer.RuntimePatch{Manager: manager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{NodeSelector: nodeSelector},
			}}},
		}}}},
	}}
}

// withFlavorPatch gives tj Kueue's flavorPatch.
func withFlavorPatch(tj *trainer.TrainJob, nodeSelector map[string]string) *trainer.TrainJob {
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{flavorPatch(trainer.KueueManager, nodeSelector)}
	return tj
}

func TestValidateUpdate(t *testing.T) {
	finished := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCompletedReason, LastTransitionTime: metav1.NewTime(time.Now())}
	running := utiltesting.MakeTrainJob("tj", "ns")
	done := running.Clone().Condition(finished)
	// withJobs is a suspended TrainJob whose Jobs exist: its shape is pinned
	// in its status.
	withJobs := running.Clone().Suspend(true).JobsStatus(trainer.JobStatus{Name: "node", Replicas: 1})
	cases := map[string]struct {
		oldTJ, newTJ *trainer.TrainJob
		wantWarnings admission.Warnings
		wantErrs     []string
	}{
		"suspend a running TrainJob": {
			oldTJ: running.Clone().Obj(),
			newTJ: running.Clone().Suspend(true).Obj(),
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
		"resources re-formatted by a client's Go types (0.5 is 500m)": {
			oldTJ: running.Clone().Resources(resources("0.5")).Obj(),
			newTJ: running.Clone().Resources(resources("500m")).Suspend(true).Obj(),
		},
		"resources changed": {
			oldTJ:    running.Clone().Resources(resources("1")).Obj(),
			newTJ:    running.Clone().Resources(resources("2")).Obj(),
			wantErrs: []string{"spec.trainer.resourcesPerNode: Invalid value: \"{...}\": trainer is immutable"},
		},
		"a runtime patch written while suspended, as Kueue writes its flavor": {
			oldTJ: running.Clone().Suspend(true).Obj(),
			newTJ: withPatch(running.Clone().Suspend(true).Obj(), "node", "node"),
		},
		"Jobs exist: a flavor written, then another in its place": {
			oldTJ: withFlavorPatch(withJobs.Clone().Obj(), map[string]string{"pool": "a"}),
			newTJ: withFlavorPatch(withJobs.Clone().Obj(), map[string]string{"pool": "b"}),
		},
		"Jobs exist: a patch that changes the containers": {
			oldTJ:    withJobs.Clone().Obj(),
			newTJ:    withPatch(withJobs.Clone().Obj(), "node", "node"),
			wantErrs: []string{"spec.runtimePatches: Forbidden: changes the Pods of Job(s) tj-node-0 beyond their scheduling directives"},
		},
		"Jobs exist: a Kubeflow v2.1 override that changes the containers": {
			oldTJ: withJobs.Clone().Obj(),
			newTJ: func() *trainer.TrainJob {
				tj := withJobs.Clone().Obj()
				tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
					TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
					Spec:       &trainer.PodTemplateSpecOverride{ServiceAccountName: ptr.To("trainer")},
				}}
				return tj
			}(),
			wantErrs: []string{"spec.podTemplateOverrides: Forbidden: changes the Pods of Job(s) tj-node-0 beyond their scheduling directives"},
		},
		"a runtime patch naming a container the runtime lacks": {
			oldTJ:    running.Clone().Suspend(true).Obj(),
			newTJ:    withPatch(running.Clone().Suspend(true).Obj(), "node", "sidecar"),
			wantErrs: []string{`spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].name: Invalid value: "sidecar"`},
		},
		"a runtime patch naming a replicated Job the runtime lacks": {
			oldTJ:    running.Clone().Suspend(true).Obj(),
			newTJ:    withPatch(running.Clone().Suspend(true).Obj(), "launcher", "node"),
			wantErrs: []string{`spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: Not found: "launcher"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := validator(t, nil, utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed"))
			warnings, err := v.ValidateUpdate(context.Background(), tc.oldTJ, tc.newTJ)
			if diff := cmp.Diff(tc.wantWarnings, warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			checkErr(t, err, tc.wantErrs)
		})
	}
}

// The API server validates the first Job of every replicated Job, created
// as the controller would create it but without an owner (the TrainJob does
// not exist yet), without storing anything.
func TestValidateCreateDryRunsTheFirstJobOfEachStep(t *testing.T) {
	rt := utiltesting.MakeRuntimeSpec().Torch().
		ReplicatedJob(utiltesting.MakeReplicatedJob("ps").Replicas(3).Obj()).
		ReplicatedJob(utiltesting.MakeReplicatedJob("eval").Completions(2).Obj()).
		ClusterRuntime("torch-distributed")
	cases := map[string]struct {
		uid string
	}{
		"with the UID the API server set": {uid: "0b0e5a1c-8f5e-4a47-9a3b-1c2d3e4f5a6b"},
		"without a UID":                   {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var created []string
			funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				job := obj.(*batchv1.Job)
				o := &client.CreateOptions{}
				o.ApplyOptions(opts)
				if diff := cmp.Diff([]string{metav1.DryRunAll}, o.DryRun); diff != "" {
					t.Errorf("Job %s created without dry run (-want +got):\n%s", job.Name, diff)
				}
				if len(job.OwnerReferences) > 0 {
					t.Errorf("Job %s dry-run with owners %+v, want none: the TrainJob does not exist yet", job.Name, job.OwnerReferences)
				}
				if got := job.Labels[trainer.JobSetUIDLabel]; got != tc.uid {
					t.Errorf("Job %s: label %s = %q, want the TrainJob's UID %q", job.Name, trainer.JobSetUIDLabel, got, tc.uid)
				}
				created = append(created, job.Name)
				return c.Create(ctx, obj, opts...)
			}}
			c := fakeClient(t, funcs, rt)
			warnings, err := NewTrainJobValidator(c, c).ValidateCreate(context.Background(),
				utiltesting.MakeTrainJob("tj", "ns").UID(tc.uid).Obj())
			if err != nil || len(warnings) > 0 {
				t.Fatalf("ValidateCreate = %q, %v; want no warning and no error", warnings, err)
			}
			if diff := cmp.Diff([]string{"tj-node-0", "tj-ps-0", "tj-eval-0"}, created); diff != "" {
				t.Errorf("Jobs dry-run (-want +got):\n%s", diff)
			}
			var jobs batchv1.JobList
			if err := c.List(context.Background(), &jobs); err != nil || len(jobs.Items) > 0 {
				t.Errorf("Jobs stored: %d (err %v), want none", len(jobs.Items), err)
			}
		})
	}
}

// Admission that looks up a Job's owner and refuses the Job when it does
// not exist (Kueue's Job webhook) has nothing to refuse at the dry run: the
// TrainJob being admitted does not exist yet, and the Job the controller
// creates once it does is accepted.
func TestValidateCreateWithAdmissionThatLooksUpOwners(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	ownerMustExist := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if owner := metav1.GetControllerOf(obj); owner != nil && owner.Kind == trainer.TrainJobKind {
			if err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: owner.Name}, &trainer.TrainJob{}); err != nil {
				return apierrors.NewForbidden(batchv1.Resource("jobs"), obj.GetName(),
					fmt.Errorf(`admission webhook "mjob.kb.io" denied the request: %w`, err))
			}
		}
		return c.Create(ctx, obj, opts...)
	}}
	warnings, err := validator(t, ownerMustExist, torch).ValidateCreate(context.Background(),
		utiltesting.MakeTrainJob("tj", "ns").UID("0b0e5a1c-8f5e-4a47-9a3b-1c2d3e4f5a6b").Obj())
	if err != nil || len(warnings) > 0 {
		t.Errorf("ValidateCreate = %q, %v; want no warning and no error", warnings, err)
	}
}

// Each replicated Job whose Jobs the API server refuses is named, with the
// API server's reason.
func TestValidateCreateNamesEachRefusedStep(t *testing.T) {
	rt := utiltesting.MakeRuntimeSpec().
		ReplicatedJob(utiltesting.MakeReplicatedJob("ps").Obj()).
		ReplicatedJob(utiltesting.MakeReplicatedJob("eval").Obj()).
		Runtime("mine", "ns")
	funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if obj.GetName() == "tj-node-0" {
			return c.Create(ctx, obj, opts...)
		}
		return jobInvalid(obj.GetName(), field.Invalid(field.NewPath("spec", "backoffLimit"), -1, "must be greater than or equal to 0"))
	}}
	_, err := validator(t, funcs, rt).ValidateCreate(context.Background(),
		utiltesting.MakeTrainJob("tj", "ns").RuntimeRef(trainer.TrainingRuntimeKind, "mine").Obj())
	checkErr(t, err, []string{
		`runtime[TrainingRuntime/mine].spec.template.spec.replicatedJobs[1]: Invalid value: "ps": the API server refuses the Jobs of replicated Job "ps" of TrainingRuntime "mine": Job.batch "tj-ps-0" is invalid: spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0`,
		`runtime[TrainingRuntime/mine].spec.template.spec.replicatedJobs[2]: Invalid value: "eval": the API server refuses the Jobs of replicated Job "eval" of TrainingRuntime "mine": Job.batch "tj-eval-0" is invalid`,
	})
	if err != nil && strings.Contains(err.Error(), `"node"`) {
		t.Errorf("the trainer step, which the API server accepts, is named in the error: %v", err)
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

// Child Jobs are named <trainjob>-<replicated job>-<index>: a TrainJob
// whose Jobs would take the names of another TrainJob's is refused, with
// both named.
func TestValidateCreateRefusesCollidingJobNames(t *testing.T) {
	bc := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("b-c").Obj()).ClusterRuntime("b-c")
	c := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("c").Obj()).ClusterRuntime("c")
	bcc := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("b-c-c").Obj()).ClusterRuntime("bcc")
	aB := utiltesting.MakeTrainJob("a-b", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "c")
	a := utiltesting.MakeTrainJob("a", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "b-c")
	cases := map[string]struct {
		existing *trainer.TrainJob
		trainJob *trainer.TrainJob
		wantErr  string
	}{
		"the other's Jobs pinned in its status": {
			existing: aB.Clone().JobsStatus(trainer.JobStatus{Name: "c", Replicas: 1}).Obj(),
			trainJob: a.Clone().Obj(),
			wantErr:  "Job a-b-c-0 of this TrainJob would have the name of a Job of TrainJob a-b",
		},
		"the other's Jobs not created yet: from its runtime": {
			existing: a.Clone().Obj(),
			trainJob: aB.Clone().Obj(),
			wantErr:  "Job a-b-c-0 of this TrainJob would have the name of a Job of TrainJob a",
		},
		"prefix names that do not collide": {
			existing: utiltesting.MakeTrainJob("a", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "c").Obj(),
			trainJob: aB.Clone().Obj(),
		},
		"another namespace": {
			existing: utiltesting.MakeTrainJob("a", "other").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "b-c").Obj(),
			trainJob: aB.Clone().Obj(),
		},
		"another namespace, the longer name": {
			existing: utiltesting.MakeTrainJob("a-b", "other").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "c").
				JobsStatus(trainer.JobStatus{Name: "c", Replicas: 1}).Obj(),
			trainJob: a.Clone().Obj(),
		},
		"a name two dashes longer": {
			existing: utiltesting.MakeTrainJob("a-b-c", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "c").Obj(),
			trainJob: utiltesting.MakeTrainJob("a", "ns").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "bcc").Obj(),
			wantErr:  "Job a-b-c-c-0 of this TrainJob would have the name of a Job of TrainJob a-b-c",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := validator(t, nil, bc, c, bcc, tc.existing)
			_, err := v.ValidateCreate(context.Background(), tc.trainJob)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// A runtime and its TrainJob applied together (one file, one kubectl
// apply): the manager's cache may not have the runtime yet when the
// TrainJob is admitted. It is read from the API server before the
// TrainJob is said to wait for a runtime that does not exist.
func TestRuntimeTheCacheHasNotSeenYet(t *testing.T) {
	rt := utiltesting.MakeRuntimeSpec().Torch().Runtime("fresh", "ns")
	api := fakeClient(t, nil, rt)
	v := NewTrainJobValidator(fakeClient(t, nil), api)
	v.apiReader = api
	warnings, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob("tj", "ns").RuntimeRef(trainer.TrainingRuntimeKind, "fresh").Obj())
	if err != nil {
		t.Fatalf("ValidateCreate: %v", err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "does not exist") {
			t.Errorf("warning %q for a runtime the API server has", w)
		}
	}
}
