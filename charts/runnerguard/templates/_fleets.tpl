{{/*
The fleets the chart knows, in the order the webhook matches them, each
with what the chart states of it. Generated from internal/presets (each
fleet's Traits) by `make fleet-table`: do not edit. fits: its fleet's
marks on a pod, in CEL, the pod's expression as %[1]s (none: any pod).
marks: the marks that decide a pod's preset, and whether a change of the
mark's value or only of its presence counts. signal: the mark only its
fleet's controller (controllerPrincipals) may change, and why. jobOwner:
its owner ends a job by deleting its pod (ownerPrincipals);
ownerInRunnerNamespace: its owner may run in the runner namespace.
needsControllers: why it cannot run without controllerPrincipals.
ownerRecord: the fleet's object whose deletion the guard notes. ownView:
the pod's owner whose conditions a death record keeps. jobMarks:
the job's marks on the pod are the fleet's word, kept as created.
defaults: the preset's values where a release leaves them out
(runnerguard.preset). Read as (fromJson (include "runnerguard.presets" .)).presets.
*/}}
{{- define "runnerguard.presets" -}}
{
  "presets": [
    {
      "name": "arc-workflow",
      "jobOwner": true,
      "defaults": {
        "runnerContainers": [
          "job"
        ],
        "diagnosticEnv": []
      },
      "fits": "%[1]s.metadata.?labels[?\"runner-pod\"].hasValue()",
      "marks": [
        {
          "path": ".metadata.?labels[?\"runner-pod\"]"
        }
      ],
      "signal": {
        "path": ".metadata.?labels[?\"runner-pod\"]",
        "message": "only ARC's runners (presets.arc-workflow.controllerPrincipals) or the garbage collector may change the label runner-pod, which decides the pod's preset"
      }
    },
    {
      "name": "gitlab",
      "jobOwner": true,
      "ownerInRunnerNamespace": true,
      "defaults": {
        "runnerContainers": [
          "build"
        ],
        "diagnosticEnv": [],
        "job": {
          "id": {
            "annotation": "job.runner.gitlab.com/id"
          },
          "project": {
            "label": "project.runner.gitlab.com/id"
          },
          "name": {
            "annotation": "job.runner.gitlab.com/name"
          },
          "url": {
            "annotation": "job.runner.gitlab.com/url"
          }
        }
      },
      "fits": "%[1]s.spec.containers.exists(c, c.name == \"helper\")",
      "jobMarks": true
    },
    {
      "name": "arc-scale-set",
      "defaults": {
        "runnerContainers": [
          "runner"
        ],
        "diagnosticEnv": [
          {
            "name": "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT",
            "value": "1"
          }
        ]
      },
      "fits": "%[1]s.metadata.?labels[?\"actions-ephemeral-runner\"].hasValue() || %[1]s.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && r.kind == \"EphemeralRunner\" && r.apiVersion.matches(\"^actions[.]github[.]com/[^/]*$\"))",
      "marks": [
        {
          "path": ".metadata.?labels[?\"actions-ephemeral-runner\"]"
        }
      ],
      "signal": {
        "path": ".metadata.?labels[?\"actions-ephemeral-runner\"]",
        "message": "only ARC's controller (presets.arc-scale-set.controllerPrincipals) or the garbage collector may change the label actions-ephemeral-runner, which decides the runner's preset"
      },
      "ownerRecord": {
        "kind": "EphemeralRunner",
        "group": "actions.github.com",
        "version": "v1alpha1",
        "resource": "ephemeralrunners"
      },
      "recordFinalizer": {
        "path": "ephemeralrunner.actions.github.com/runner-registration-finalizer",
        "message": "only ARC's controller (presets.arc-scale-set.controllerPrincipals), the garbage collector or a cluster admin may remove ephemeralrunner.actions.github.com/runner-registration-finalizer, whose removal says the runner's job is over (ARC removes it once the Actions service let the runner go)"
      }
    },
    {
      "name": "arc-legacy",
      "defaults": {
        "runnerContainers": [
          "runner"
        ],
        "diagnosticEnv": [
          {
            "name": "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT",
            "value": "1"
          }
        ]
      },
      "fits": "%[1]s.metadata.?annotations[?\"actions-runner/unregistration-complete-timestamp\"].hasValue() || %[1]s.spec.containers.exists(c, c.name == \"docker\") || %[1]s.metadata.?labels[?\"runnerset-name\"].hasValue() || %[1]s.metadata.?ownerReferences.orValue([]).exists(r, r.apiVersion.matches(\"^actions[.]summerwind[.]dev/[^/]*$\"))",
      "marks": [
        {
          "path": ".metadata.?labels[?\"runnerset-name\"]"
        },
        {
          "path": ".metadata.?annotations[?\"actions-runner/unregistration-complete-timestamp\"]",
          "presence": true
        }
      ],
      "signal": {
        "path": ".metadata.?annotations[?\"actions-runner/unregistration-complete-timestamp\"]",
        "message": "only legacy ARC's controller (presets.arc-legacy.controllerPrincipals) or the garbage collector may change actions-runner/unregistration-complete-timestamp, the runner's idle signal"
      },
      "needsControllers": "legacy ARC's controller, the only writer of its runners' idle signal (e.g. system:serviceaccount:actions-runner-system:actions-runner-controller); without it legacy ARC's own scale-down would be refused until maxProtected"
    },
    {
      "name": "tekton",
      "jobOwner": true,
      "defaults": {
        "runnerContainers": [
          "step-*"
        ],
        "diagnosticEnv": []
      },
      "ownView": {
        "kind": "TaskRun",
        "group": "tekton.dev",
        "version": "v1",
        "resource": "taskruns"
      },
      "fits": "%[1]s.metadata.?labels[?\"tekton.dev/taskRun\"].hasValue()",
      "marks": [
        {
          "path": ".metadata.?labels[?\"tekton.dev/taskRun\"]",
          "presence": true
        }
      ],
      "jobMarks": true
    },
    {
      "name": "buildkite",
      "defaults": {
        "runnerContainers": [
          "container-*",
          "agent",
          "checkout"
        ],
        "diagnosticEnv": [],
        "job": {
          "id": {
            "label": "buildkite.com/job-uuid"
          },
          "project": {
            "annotation": "buildkite.com/pipeline-slug"
          },
          "name": {
            "annotation": "buildkite.com/step-key"
          },
          "url": {
            "annotation": "buildkite.com/job-url"
          }
        }
      },
      "ownView": {
        "kind": "Job",
        "group": "batch",
        "version": "v1",
        "resource": "jobs"
      },
      "fits": "%[1]s.metadata.?labels[?\"buildkite.com/job-uuid\"].hasValue()",
      "marks": [
        {
          "path": ".metadata.?labels[?\"buildkite.com/job-uuid\"]",
          "presence": true
        }
      ],
      "jobMarks": true
    },
    {
      "name": "woodpecker",
      "jobOwner": true,
      "ownerInRunnerNamespace": true,
      "defaults": {
        "runnerContainers": [
          "wp-*"
        ],
        "diagnosticEnv": [],
        "job": {
          "id": {
            "label": "woodpecker-ci.org/task-uuid"
          },
          "project": {
            "env": "CI_REPO"
          },
          "name": {
            "label": "woodpecker-ci.org/step"
          },
          "url": {
            "env": "CI_STEP_URL"
          },
          "commit": {
            "env": "CI_COMMIT_SHA"
          },
          "forge": {
            "label": "woodpecker-ci.org/forge-id"
          },
          "repositoryID": {
            "label": "woodpecker-ci.org/repo-forge-id"
          }
        }
      },
      "fits": "%[1]s.metadata.?labels[?\"woodpecker-ci.org/step\"].hasValue()",
      "marks": [
        {
          "path": ".metadata.?labels[?\"woodpecker-ci.org/step\"]",
          "presence": true
        }
      ],
      "jobMarks": true
    },
    {
      "name": "jenkins",
      "jobOwner": true,
      "ownerInRunnerNamespace": true,
      "defaults": {
        "runnerContainers": [
          "jnlp"
        ],
        "diagnosticEnv": []
      },
      "fits": "%[1]s.metadata.?labels[?\"jenkins/label-digest\"].hasValue()",
      "marks": [
        {
          "path": ".metadata.?labels[?\"jenkins/label-digest\"]",
          "presence": true
        }
      ],
      "jobMarks": true
    },
    {
      "name": "generic",
      "defaults": {
        "runnerContainers": [
          "runner"
        ],
        "diagnosticEnv": [
          {
            "name": "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT",
            "value": "1"
          }
        ]
      },
      "signal": {
        "path": ".metadata.?annotations[?\"runnerguard.io/idle\"]",
        "message": "only your pool's controller (presets.generic.controllerPrincipals) or the garbage collector may change runnerguard.io/idle, the runner's idle signal"
      },
      "jobMarks": true
    }
  ]
}
{{- end }}
