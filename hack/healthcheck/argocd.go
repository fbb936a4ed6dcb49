package main

import (
	"context"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type argoCDRequest struct {
	HealthLua string `json:"healthLua"`
	// UseOpenLibs is argocd-cm's resource.customizations.useOpenLibs.<group>_<kind>; off unless set.
	UseOpenLibs bool `json:"useOpenLibs"`
}

// The health codes Argo CD accepts from a script; anything else becomes Unknown.
var argoCDHealthCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

// argoCDHealth runs a resource health script the way Argo CD's controller runs one from argocd-cm
// (util/lua in argoproj/argo-cd): gopher-lua, with the standard libraries skipped unless useOpenLibs,
// then only package, base and table opened, and an os library reduced to os.time and os.date; the
// object as the global `obj`; one second to finish; the returned table's status and message read back.
// A script that uses string, math or io without useOpenLibs fails here as it fails in Argo CD.
func argoCDHealth(req argoCDRequest, obj *unstructured.Unstructured) verdict {
	L := lua.NewState(lua.Options{SkipOpenLibs: !req.UseOpenLibs})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return verdict{Status: "Unknown", Error: fmt.Sprintf("opening the Lua %s library: %v", lib.name, err)}
		}
	}
	if err := openTimeOnlyOs(L); err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, obj.Object))
	if err := L.DoString(req.HealthLua); err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return verdict{Status: "Unknown", Error: fmt.Sprintf("expect table output from Lua script, not %s", L.Get(-1).Type())}
	}
	status, err := stringField(ret, "status")
	if err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	message, err := stringField(ret, "message")
	if err != nil {
		return verdict{Status: "Unknown", Error: err.Error()}
	}
	if !argoCDHealthCodes[status] {
		return verdict{Status: "Unknown", Message: "Lua returned an invalid health status"}
	}
	return verdict{Status: status, Message: message}
}

// openTimeOnlyOs leaves `os` (global and require("os")) with only time and date: Argo CD's custom
// scripts get these two, never os.exit, os.execute, os.remove or os.getenv.
func openTimeOnlyOs(L *lua.LState) error {
	if err := L.CallByParam(lua.P{Fn: L.NewFunction(lua.OpenOs), NRet: 1, Protect: true}, lua.LString(lua.OsLibName)); err != nil {
		return fmt.Errorf("opening the Lua os library: %w", err)
	}
	full, ok := L.Get(-1).(*lua.LTable)
	L.Pop(1)
	if !ok {
		return fmt.Errorf("the Lua os library did not open as a table")
	}
	reduced := L.NewTable()
	for _, name := range []string{"time", "date"} {
		reduced.RawSetString(name, full.RawGetString(name))
	}
	L.SetGlobal(lua.OsLibName, reduced)
	if loaded, ok := L.GetField(L.Get(lua.RegistryIndex), "_LOADED").(*lua.LTable); ok {
		loaded.RawSetString(lua.OsLibName, reduced)
	}
	L.PreloadModule(lua.OsLibName, func(L *lua.LState) int {
		L.Push(reduced)
		return 1
	})
	return nil
}

// stringField reads a string field of the returned table; Argo CD decodes the table as JSON into
// {status, message string}, so a field of another type is an error there too.
func stringField(t *lua.LTable, name string) (string, error) {
	switch v := t.RawGetString(name).(type) {
	case *lua.LNilType:
		return "", nil
	case lua.LString:
		return string(v), nil
	default:
		return "", fmt.Errorf("the script returned %s as a %s, not a string", name, v.Type())
	}
}

// toLua converts an unstructured value as Argo CD does: maps become tables keyed by string, lists
// 1-based array tables, numbers (int64 or float64) Lua numbers, null nil.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(L, item))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetH(lua.LString(k), toLua(L, item))
		}
		return t
	default:
		return lua.LNil
	}
}
