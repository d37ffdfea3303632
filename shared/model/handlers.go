package model

import (
	"context"
	"net/http"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
)

// Preferences stores users' preferred models.
type Preferences interface {
	// SetModelPreference records userID's preferred model. NotFound when
	// the user does not exist.
	SetModelPreference(ctx context.Context, userID, modelID string) error
	// ModelPreference returns userID's preferred model id, "" when unset.
	ModelPreference(ctx context.Context, userID string) (string, error)
}

type modelsResponse struct {
	Models []Model `json:"models"`
}

func handleList(reg *Registry) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (modelsResponse, error) {
		return modelsResponse{Models: reg.List()}, nil
	})
}

// PreferenceRequest is the body of POST /api/users/{userId}/model-preference.
type PreferenceRequest struct {
	ModelID string `json:"modelId"`
}

// Validate requires modelId.
func (p PreferenceRequest) Validate() error {
	var f errs.FieldErrors
	if p.ModelID == "" {
		f.Add("modelId", "is required")
	}
	return f.Err("model.PreferenceRequest")
}

// Preference is a user's model preference.
type Preference struct {
	UserID  string `json:"userId"`
	ModelID string `json:"modelId"`
}

func handleSetPreference(reg *Registry, prefs Preferences) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, in PreferenceRequest) (Preference, error) {
		const op = "model.SetPreference"
		if _, err := reg.Lookup(in.ModelID); err != nil {
			return Preference{}, err
		}
		userID := r.PathValue("userId")
		if err := auth.Authorize(r.Context(), op, userID); err != nil {
			return Preference{}, err
		}
		if err := prefs.SetModelPreference(r.Context(), userID, in.ModelID); err != nil {
			return Preference{}, errs.Wrap(op, err)
		}
		return Preference{UserID: userID, ModelID: in.ModelID}, nil
	})
}
