// The stylesheet is imported for Vite, which emits it as a content-hashed file beside the script.
declare module "*.css";
