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

package jobplan

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The environment the xgboost policy gives the trainer container, read by
// XGBoost's collective (its tracker and workers).
const (
	EnvDMLCTrackerURI  = "DMLC_TRACKER_URI"
	EnvDMLCTrackerPort = "DMLC_TRACKER_PORT"
	EnvDMLCTaskID      = "DMLC_TASK_ID"
	EnvDMLCNumWorker   = "DMLC_NUM_WORKER"
)

var xgboostEnvNames = []string{EnvDMLCTrackerURI, EnvDMLCTrackerPort, EnvDMLCTaskID, EnvDMLCNumWorker}

// xgboostPlugin is XGBoost distributed training (mlPolicy.xgboost), as
// Kubeflow Trainer v2.3 runs it: node 0 runs the tracker on the trainer
// port, and each node runs one worker per GPU, or one without GPUs. When
// the TrainJob sets spec.trainer, the trainer container gets the tracker's
// address and port, the node's rank (its completion index) and the number
// of workers, and the port. The TrainJob may not set those variables.
type xgboostPlugin struct{}

func (xgboostPlugin) Name() string { return "xgboost" }

func (xgboostPlugin) selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.XGBoost != nil
}

func (p xgboostPlugin) Validate(in *Input) field.ErrorList {
	if !p.selected(in.Runtime.Spec) {
		return nil
	}
	return checkFramework(in, p.Name())
}

func (p xgboostPlugin) Contribute(in *Input, _ *Plan) field.ErrorList {
	if !p.selected(in.Runtime.Spec) || in.Container == nil {
		return nil
	}
	t, c := in.TrainJob.Spec.Trainer, in.Container
	if t == nil {
		return nil
	}
	if errs := reservedEnv(t.Env, xgboostEnvNames, "xgboost", in.Runtime); len(errs) > 0 {
		return errs
	}
	workersPerNode := max(1, gpusPerNode(resourcesPerNode(in.TrainJob, c)))
	c.Env = mergeEnv(c.Env, []corev1.EnvVar{
		{Name: EnvDMLCTrackerURI, Value: node0(in)},
		{Name: EnvDMLCTrackerPort, Value: strconv.Itoa(int(TrainerPort))},
		completionIndexEnv(EnvDMLCTaskID),
		{Name: EnvDMLCNumWorker, Value: strconv.FormatInt(int64(in.NumNodes())*workersPerNode, 10)},
	})
	addPort(c, TrainerPort)
	return nil
}
