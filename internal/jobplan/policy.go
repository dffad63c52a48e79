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
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Each ML framework of a runtime's mlPolicy (torch, mpi, jax, xgboost,
// flux) is a plugin of its own file, which does nothing unless the runtime
// selects it (the API lets a runtime select one at most). It adds what the
// framework's processes need to find each other and run: the environment,
// ports, volumes and init containers of the trainer step, after the
// TrainJob's trainer settings (Input.Container), and children of their own
// (Secrets, ConfigMaps) when they need some. A runtime that selects none
// runs the trainer step with the TrainJob's settings alone.

// checkFramework is what every ML framework needs of the runtime: a
// trainer step with a container named node. The trainer plugin reports
// the missing container when the TrainJob sets spec.trainer; this reports
// it otherwise, so that it is reported once.
func checkFramework(in *Input, framework string) field.ErrorList {
	switch {
	case in.TrainerStep() < 0:
		return field.ErrorList{field.Required(in.replicatedJobsPath(), fmt.Sprintf(
			"the %s policy needs a trainer step: a replicated Job labelled %s=%s", framework, trainer.AncestorStepLabel, trainer.TrainerStep))}
	case in.TrainJob.Spec.Trainer == nil && !hasTrainerContainer(in):
		return field.ErrorList{missingTrainerContainer(in)}
	}
	return nil
}
