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
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// plainPolicy is a runtime with no ML framework (an mlPolicy with numNodes
// only, or none): the trainer step gets the TrainJob's overrides and
// nothing else, and the Pods find each other, if they need to, by the
// hostnames every child Pod has.
type plainPolicy struct{}

func (plainPolicy) Name() string { return "plain" }

// Selected: plain is the policy of a runtime that selects no other.
func (plainPolicy) Selected(*trainer.TrainingRuntimeSpec) bool { return true }

func (plainPolicy) SetsUpTrainer() bool { return false }

func (plainPolicy) Apply(*PolicyInput, *Plan) field.ErrorList { return nil }
