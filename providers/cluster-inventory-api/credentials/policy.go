package credentials

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// CLIArgsPolicy says what becomes of the arguments a profile adds to an
// access provider's command (KEP-5339's profileSourcedCLIArgsPolicy).
type CLIArgsPolicy string

// The CLIArgsPolicy values.
const (
	// CLIArgsIgnore drops the profile's arguments: the command runs with
	// the configured arguments only. It is the default.
	CLIArgsIgnore CLIArgsPolicy = "Ignore"
	// CLIArgsAppend appends the profile's arguments, in order, after the
	// configured ones.
	CLIArgsAppend CLIArgsPolicy = "Append"
)

// EnvVarsPolicy says what becomes of the environment variables a profile
// adds to an access provider's command (KEP-5339's
// profileSourcedEnvVarsPolicy).
type EnvVarsPolicy string

// The EnvVarsPolicy values.
const (
	// EnvVarsIgnore drops the profile's variables. It is the default.
	EnvVarsIgnore EnvVarsPolicy = "Ignore"
	// EnvVarsAppendIfNotExists adds the profile's variables whose names the
	// configured env does not set; the configuration wins.
	EnvVarsAppendIfNotExists EnvVarsPolicy = "AppendIfNotExists"
	// EnvVarsReplace adds the profile's variables, replacing configured
	// ones of the same name; the profile wins.
	EnvVarsReplace EnvVarsPolicy = "Replace"
)

// The reserved cluster extensions through which a profile's cluster entry
// adds arguments and environment variables to the access provider's
// command, governed by the access provider's policies.
const (
	// ExtensionAdditionalArgs holds {"args": [strings]} (the ClusterProfile
	// CRD wants an object), or a bare list of strings.
	ExtensionAdditionalArgs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	// ExtensionAdditionalEnvs holds {"envs": [{"name", "value"}]}, an
	// object of names to string values, or a bare list of {"name",
	// "value"}.
	ExtensionAdditionalEnvs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
)

// maxProfileSourced bounds the arguments and the variables a profile adds.
const maxProfileSourced = 64

func validatePolicies(ap AccessProvider) error {
	switch ap.ProfileSourcedCLIArgsPolicy {
	case "", CLIArgsIgnore, CLIArgsAppend:
	default:
		return fmt.Errorf("profileSourcedCLIArgsPolicy %q is not one of Append, Ignore", ap.ProfileSourcedCLIArgsPolicy)
	}
	switch ap.ProfileSourcedEnvVarsPolicy {
	case "", EnvVarsIgnore, EnvVarsAppendIfNotExists, EnvVarsReplace:
	default:
		return fmt.Errorf("profileSourcedEnvVarsPolicy %q is not one of AppendIfNotExists, Replace, Ignore", ap.ProfileSourcedEnvVarsPolicy)
	}
	return nil
}

// applyProfileSourced adds to exec what the cluster entry's reserved
// extensions ask for, as the access provider's policies allow. Errors name
// the extension, never the values: they may be secrets.
func applyProfileSourced(ap AccessProvider, exec *clientcmdv1.ExecConfig, cluster clientcmdv1.Cluster) error {
	var rawArgs, rawEnvs []byte
	for _, ext := range cluster.Extensions {
		switch ext.Name {
		case ExtensionAdditionalArgs:
			rawArgs = ext.Extension.Raw
		case ExtensionAdditionalEnvs:
			rawEnvs = ext.Extension.Raw
		}
	}
	if len(rawArgs) > 0 && ap.ProfileSourcedCLIArgsPolicy == CLIArgsAppend {
		var args []string
		if err := json.Unmarshal(unwrap(rawArgs, "args"), &args); err != nil {
			return fmt.Errorf(`extension %s: neither {"args": [strings]} nor a list of strings`, ExtensionAdditionalArgs)
		}
		if len(args) > maxProfileSourced {
			return fmt.Errorf("extension %s: %d arguments, more than %d", ExtensionAdditionalArgs, len(args), maxProfileSourced)
		}
		for i, a := range args {
			if strings.ContainsRune(a, 0) {
				return fmt.Errorf("extension %s: argument %d contains a NUL byte", ExtensionAdditionalArgs, i)
			}
		}
		exec.Args = append(slices.Clip(exec.Args), args...)
	}
	if len(rawEnvs) > 0 && ap.ProfileSourcedEnvVarsPolicy != "" && ap.ProfileSourcedEnvVarsPolicy != EnvVarsIgnore {
		envs, err := decodeEnvs(rawEnvs)
		if err != nil {
			return err
		}
		for _, v := range envs {
			i := slices.IndexFunc(exec.Env, func(c clientcmdv1.ExecEnvVar) bool { return c.Name == v.Name })
			switch {
			case i < 0:
				exec.Env = append(exec.Env, v)
			case ap.ProfileSourcedEnvVarsPolicy == EnvVarsReplace:
				exec.Env[i].Value = v.Value
			}
		}
	}
	return nil
}

// unwrap returns the list under key of an object that has only that key,
// or raw itself.
func unwrap(raw []byte, key string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && len(obj) == 1 {
		if inner, ok := obj[key]; ok && strings.HasPrefix(strings.TrimSpace(string(inner)), "[") {
			return inner
		}
	}
	return raw
}

// decodeEnvs reads the additional-envs extension: {"envs": [{name, value}]},
// a list of {name, value}, or an object of names to values (sorted by name).
func decodeEnvs(raw []byte) ([]clientcmdv1.ExecEnvVar, error) {
	var envs []clientcmdv1.ExecEnvVar
	if err := json.Unmarshal(unwrap(raw, "envs"), &envs); err != nil {
		var m map[string]string
		if json.Unmarshal(raw, &m) != nil {
			return nil, fmt.Errorf(`extension %s: neither {"envs": [{name, value}]}, a list of {name, value} nor an object of strings`, ExtensionAdditionalEnvs)
		}
		envs = envs[:0]
		for k, v := range m {
			envs = append(envs, clientcmdv1.ExecEnvVar{Name: k, Value: v})
		}
		slices.SortFunc(envs, func(a, b clientcmdv1.ExecEnvVar) int { return strings.Compare(a.Name, b.Name) })
	}
	if len(envs) > maxProfileSourced {
		return nil, fmt.Errorf("extension %s: %d variables, more than %d", ExtensionAdditionalEnvs, len(envs), maxProfileSourced)
	}
	seen := map[string]bool{}
	for i, v := range envs {
		switch {
		case v.Name == "" || strings.ContainsAny(v.Name, "=\x00"):
			return nil, fmt.Errorf("extension %s: variable %d has an invalid name", ExtensionAdditionalEnvs, i)
		case strings.ContainsRune(v.Value, 0):
			return nil, fmt.Errorf("extension %s: variable %q contains a NUL byte", ExtensionAdditionalEnvs, v.Name)
		case seen[v.Name]:
			return nil, fmt.Errorf("extension %s: variable %q is set twice", ExtensionAdditionalEnvs, v.Name)
		}
		seen[v.Name] = true
	}
	return envs, nil
}
