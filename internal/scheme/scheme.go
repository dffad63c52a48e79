// Package scheme holds the one runtime.Scheme of the product: every type its
// binaries and tests read or write, Kubernetes' own and the TrainJob API.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Scheme holds Kubernetes' types and the TrainJob API.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(trainer.AddToScheme(Scheme))
}
